"""Build reward instances from specs, each unique model exactly once per process.

Two specs share an instance when they resolve to the same *model identity*: implementation, weights
(``model_path``), resolved dtype (``auto``: the card's ``default_dtype`` on the device), resolved device, constructor kwargs and input ``limits`` (they shape what the
instance accepts). Stream-level settings (name, weight, batch size, datasets, async) are not part of
it, so a training and an evaluation spec of the same model share one loaded copy.

Composite rewards (group wrappers over a base, frame averages over an image reward) declare their
inner rewards with :meth:`~rewardzoo.rewards.base.Reward.inner_rewards`; the loader builds those
like any other entry (so they share instances too) and hands the built rewards to the constructor.
Every built instance carries its record (``reward.info``, from its model card).
"""

from __future__ import annotations

import inspect
import json
import threading
from typing import Any, Hashable

from ..spec.config import RewardSpec
from .resolve import parse_spec
from ..errors import ConfigError, RegistryError, RewardZooError
from ..catalog.registry import canonical_target, describe, lookup, resolve
from ..rewards.base import Reward, check_kind
from ..shared.device import check_device, resolve_device
from ..shared.options import known_options


class RewardLoader:
    """Cache of constructed rewards keyed by model identity.

    ``constructions`` counts the models built (a test checks dedup with it).
    """

    def __init__(self) -> None:
        self._instances: dict[Hashable, Reward] = {}
        self._lock = threading.RLock()
        self.constructions = 0

    @staticmethod
    def identity(spec: RewardSpec) -> Hashable:
        """The model identity of a spec (see the module docstring)."""
        try:
            kwargs = json.dumps(spec.kwargs, sort_keys=True, default=repr)
        except TypeError as exc:
            raise ConfigError(f"kwargs are not comparable: {exc}", entry=spec.name, field="kwargs") from None
        limits = tuple(sorted(spec.limits.items()))
        device = device_for(spec)
        return (canonical_target(spec.reward_model), spec.model_path, dtype_for(spec, device), device, kwargs, limits)

    def load(self, spec: RewardSpec | dict | str) -> Reward:
        """The shared instance for ``spec``, constructing it on first use. An entry with ``environment:`` is a
        :class:`~rewardzoo.environments.reward.WorkerReward`: built in its environment's worker process, nothing
        of it imported here."""
        spec = parse_spec(spec) if not isinstance(spec, RewardSpec) else spec
        if spec.environment is not None:
            return self._in_worker(spec)
        try:
            key = self.identity(spec)
        except RegistryError as exc:
            raise exc.in_entry(spec.name, "reward_model") from exc.__cause__
        with self._lock:
            if key not in self._instances:
                self._instances[key] = self._construct(spec, device=key[3], dtype=key[2])
            return self._instances[key]

    @property
    def instances(self) -> list[Reward]:
        return list(self._instances.values())

    def _in_worker(self, spec: RewardSpec) -> Reward:
        from ..environments.reward import WorkerReward

        key = WorkerReward.identity(spec)
        with self._lock:
            if key not in self._instances:
                try:
                    self._instances[key] = WorkerReward(spec)
                except RegistryError as exc:
                    raise exc.in_entry(spec.name, "reward_model") from exc.__cause__
                except ConfigError as exc:  # the environment's (its interpreter, its build): name the entry
                    if exc.entry is not None:
                        raise
                    raise ConfigError(exc.message, entry=spec.name, field=exc.field) from exc
                self.constructions += 1
            return self._instances[key]

    def close(self) -> None:
        """Release what the built rewards hold outside this process: the worker processes of entries with
        ``environment:`` (a worker stops once no entry uses it). In-process rewards stay usable."""
        with self._lock:
            held = [key for key in self._instances if isinstance(key, tuple) and key[:1] == ("environment",)]
            for key in held:
                self._instances.pop(key).close()

    def _construct(self, spec: RewardSpec, device: str, dtype: str) -> Reward:
        try:
            cls = resolve(spec.reward_model)
        except RegistryError as exc:
            raise exc.in_entry(spec.name, "reward_model") from exc.__cause__
        if not (isinstance(cls, type) and issubclass(cls, Reward)):
            raise RegistryError(f"'{spec.reward_model}' resolves to {cls!r}, which is not a rewardzoo Reward subclass")
        try:
            # inner rewards inherit the entry's device as written (``auto`` stays ``auto``), so a CPU-only base
            # under a wrapper that resolved to CUDA still runs where its card says it can
            kwargs, inner = cls.inner_rewards(dict(spec.kwargs), model_path=spec.model_path, device=spec.device,
                                              dtype=spec.dtype)
            _check_options(cls, kwargs, inner)
            for param, entry in inner.items():
                inner_spec = parse_spec({"name": f"{spec.name}.{param}", **entry}, f"{spec.name}: {param}")
                try:
                    kwargs[param] = self.load(inner_spec)
                except RegistryError as exc:  # name the entry the user wrote, not the inner one
                    raise exc.in_entry(spec.name, f"kwargs.{param}") from exc.__cause__
            instance = cls.named(spec.reward_model.lower(), model_path=spec.model_path, device=device, dtype=dtype,
                                 **kwargs)
        except ConfigError as exc:
            if exc.entry is not None:
                raise
            raise ConfigError(exc.message, entry=spec.name, field=exc.field) from exc
        except RewardZooError:
            raise
        except (TypeError, ValueError) as exc:  # a constructor refusing its options: name the entry
            raise ConfigError(f"{cls.__name__} could not be built: {exc}", entry=spec.name) from exc
        check_kind(instance)
        instance.info = describe(spec.reward_model, cls)
        if spec.limits:
            instance.inputs = instance.inputs.with_limits(spec.limits)
        self.constructions += 1
        return instance


_RESERVED = ("self", "model_path", "device", "dtype")


def dtype_for(spec: RewardSpec, device: str) -> str:
    """The dtype a spec's reward runs in: the configured one, or for ``auto`` (the default) its model
    card's ``default_dtype`` on ``device``'s kind (the reference's precision there), else float32."""
    if spec.dtype != "auto":
        return spec.dtype
    found = lookup(spec.reward_model)
    return found.dtype_on(device) if found is not None else "float32"


def device_for(spec: RewardSpec) -> str:
    """The device a spec's reward runs on, checked against this machine and against the devices its
    model card says it can use (``auto`` picks CUDA only for a reward that can use it)."""
    found = lookup(spec.reward_model)
    kinds = found.devices if found is not None else None
    requested = spec.device
    if requested == "auto" and kinds is not None and "cuda" not in kinds:
        requested = "cpu"  # also spares a CPU-only reward the torch import
    if kinds is not None and requested != "auto" and requested.split(":")[0] not in kinds:
        raise ConfigError(f"'{spec.reward_model}' runs on {' or '.join(kinds)} only (its model card's devices); "
                          f"remove device: {spec.device} or set it to {kinds[0]}", entry=spec.name, field="device")
    try:
        return check_device(resolve_device(requested))
    except ValueError as exc:
        raise ConfigError(str(exc), entry=spec.name, field="device") from None


def _check_options(cls: type, kwargs: dict[str, Any], inner: dict[str, Any]) -> None:
    """Every configured option must be a constructor parameter (unless it takes ``**kwargs``)."""
    params = _init_params(cls)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    known_options(cls.__name__, kwargs, [p for p in params if p not in _RESERVED and p not in inner])


def _init_params(cls: type) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(cls.__init__).parameters)
