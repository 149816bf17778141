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

import contextlib
import inspect
import json
import pickle
import threading
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from ..errors import ConfigError, RegistryError, RewardZooError, WakeError
from ..registry import Found, find
from ..rewards.base import Reward, before_call, check_kind
from ..rewards.info import RewardInfo
from ..rewards.options import RewardOptions
from ..shared.device import check_device, resolve_device
from ..shared.hub import hub_offline
from ..shared.options import known_options
from ..shared.weights import refused_reason
from ..spec.config import RewardSpec
from .hub_weights import check_weights, pinned
from .residency import process_residency
from .resolve import parse_spec

if TYPE_CHECKING:
    from ..environments.reward import WorkerReward

#: Where a registry error is reported: the entry the user wrote and its field.
Label = tuple[str, str]


@dataclass(frozen=True)
class ResolvedReward:
    """One spec resolved once (:func:`resolve_reward`): everything the loader reads after the registry.

    ``implementation``: the reward class; ``record``: its card's record (what a built instance carries as
    ``reward.info``); ``device`` / ``dtype``: where and in what precision it runs; ``identity``: the model identity
    (entries with equal identities share one instance, see the module docstring).
    """

    spec: RewardSpec
    implementation: type[Reward]
    record: RewardInfo
    device: str
    dtype: str
    identity: Hashable


def resolve_reward(spec: RewardSpec, label: Label | None = None, placed: str | None = None) -> ResolvedReward:
    """Resolve ``spec`` with one registry look-up; a registry error names ``label`` (default: the entry's
    ``reward_model``). ``placed``: the device a ``device: auto`` entry was placed on (its inner rewards, still
    ``auto``, are placed by their own keys)."""
    with registry_errors(label or (spec.name, "reward_model")):
        found = find(spec.reward_model)
        device = device_for(spec if placed is None else replace(spec, device=placed), found.card)
        dtype = dtype_for(spec, device, found.card)
        identity = model_identity(found.target, spec, dtype, device)
        cls = _reward_class(found)
    return ResolvedReward(spec, cls, found.record(cls), device, dtype, identity)


def model_identity(target: str, spec: RewardSpec, dtype: str, device: str) -> Hashable:
    """The model identity of ``spec`` resolved to ``target`` (its implementation), ``dtype`` and ``device``."""
    return (target, spec.model_path, dtype, device, _kwargs_key(spec), tuple(sorted(spec.limits.items())))


def auto_key(spec: RewardSpec) -> Hashable:
    """What a ``device: auto`` entry is placed by: its model identity as written, without the device (entries
    sharing a model share a key, so they land on one device)."""
    return (
        spec.reward_model.lower(),
        spec.model_path,
        spec.dtype,
        _kwargs_key(spec),
        tuple(sorted(spec.limits.items())),
    )


@contextmanager
def registry_errors(label: Label) -> Iterator[None]:
    """The one place a registry error is relabelled with the config entry (and field) it came from; an error
    that already names an entry (an inner reward's, labelled on its way up) passes unchanged."""
    try:
        yield
    except RegistryError as exc:
        if exc.entry is not None:
            raise
        raise exc.in_entry(*label) from exc.__cause__


def _reward_class(found: Found) -> type:
    cls = found.load_class()
    if not (isinstance(cls, type) and issubclass(cls, Reward)):
        raise RegistryError(f"'{found.name}' resolves to {cls!r}, which is not a rewardzoo Reward subclass")
    return cls


def _kwargs_key(spec: RewardSpec) -> str:
    try:
        return json.dumps(spec.kwargs, sort_keys=True, default=repr)
    except TypeError as exc:
        raise ConfigError(f"kwargs are not comparable: {exc}", entry=spec.name, field="kwargs") from None


class RewardLoader:
    """Cache of constructed rewards keyed by model identity.

    ``constructions`` counts the models built (a test checks dedup with it).
    """

    def __init__(self) -> None:
        self._instances: dict[Hashable, Reward] = {}
        self._lock = threading.RLock()
        self.constructions = 0
        self.residency = process_residency()
        self._offload: dict[int, set[str]] = {}  # id(instance) -> the offload modes of the entries using it
        #: ``auto_key(spec)`` -> the device a ``device: auto`` entry was placed on (rewardzoo.core.memory_plan)
        self.placement: dict[Hashable, str] = {}

    @staticmethod
    def identity(spec: RewardSpec) -> Hashable:
        """The model identity of a spec (see the module docstring)."""
        return resolve_reward(spec).identity

    def load(self, spec: RewardSpec | dict[str, Any] | str, *, label: Label | None = None) -> Reward:
        """The shared instance for ``spec``, constructing it on first use. An entry with ``environment:`` is a
        :class:`~rewardzoo.environments.reward.WorkerReward`: built in its environment's worker process, nothing
        of it imported here. ``label``: the entry and field a registry error names (an inner reward's: its
        wrapper's entry)."""
        spec = parse_spec(spec) if not isinstance(spec, RewardSpec) else spec
        if spec.environment is not None:
            return self._in_worker(spec, label or (spec.name, "reward_model"))
        placed = self.placement.get(auto_key(spec)) if spec.device == "auto" and self.placement else None
        spec = pinned(spec, label)  # a pinned hub revision (or the lock's): its snapshot folder
        resolved = resolve_reward(spec, label, placed)
        with self._lock:
            old = self._instances.get(resolved.identity)
            if old is None or self.residency.wake_failed(old):  # weights that cannot wake: a fresh build
                built = self._instances[resolved.identity] = self._construct(resolved, label)
                before_call(built, self.residency.wake_reward)
            reward = self._instances[resolved.identity]
            self._offload.setdefault(id(reward), set()).add(spec.offload)
            if spec.offload == "none":  # an entry that keeps the model resident: awake from now on
                self.wake([reward])
            elif spec.offload == "drop":  # the checkpoint files a wake reads back: those resolved now, at load
                self.residency.sources(reward)
            return reward

    def offload(self, reward: Reward) -> str:
        """Where ``reward``'s weights go when its entries sleep: ``none`` when any entry using it says so, else
        ``cpu`` when any says so, else ``drop``."""
        modes = self._offload.get(id(reward), {"none"})
        return "none" if "none" in modes else "cpu" if "cpu" in modes else "drop"

    def sleep(self, rewards: Iterable[Reward]) -> None:
        """Put ``rewards`` to sleep as their entries' ``offload`` says (rewardzoo.core.residency); weights that a
        reward with ``offload: none`` also holds stay awake."""
        with self._lock:
            plan = [(r, self.offload(r)) for r in rewards if self.offload(r) != "none"]
            if plan:
                self.residency.sleep(plan, keep=[r for r in self.instances if self.offload(r) == "none"])

    def wake(self, rewards: Iterable[Reward]) -> None:
        """Bring ``rewards``' weights back to their devices (a no-op for awake ones)."""
        for reward in rewards:
            self.residency.wake([reward], getattr(reward, "name", None))

    def _wake_if_possible(self, rewards: Iterable[Reward]) -> None:
        """:meth:`wake` each of ``rewards`` that can (one whose files are gone or rewritten stays asleep)."""
        for reward in rewards:
            try:
                self.residency.wake([reward], getattr(reward, "name", None))
            except WakeError:
                pass

    @property
    def instances(self) -> list[Reward]:
        return list(self._instances.values())

    def _in_worker(self, spec: RewardSpec, label: Label) -> Reward:
        from ..environments.reward import WorkerReward

        key = WorkerReward.identity(spec)
        with self._lock:
            if key not in self._instances:
                try:
                    with registry_errors(label):
                        self._instances[key] = WorkerReward(spec)
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
                cast("WorkerReward", self._instances.pop(key)).close()
            self._wake_if_possible(self.instances)

    def _construct(self, resolved: ResolvedReward, label: Label | None) -> Reward:
        spec, cls = resolved.spec, resolved.implementation
        try:
            # inner rewards inherit the entry's device as written (``auto`` stays ``auto``), so a CPU-only base
            # under a wrapper that resolved to CUDA still runs where its card says it can
            kwargs, inner = cls.inner_rewards(
                dict(spec.kwargs), model_path=spec.model_path, device=spec.device, dtype=spec.dtype
            )
            _check_options(cls, kwargs, inner)
            for param, entry in inner.items():
                inner_spec = parse_spec(
                    {"name": f"{spec.name}.{param}", "offload": spec.offload, **entry}, f"{spec.name}: {param}"
                )
                # a registry error names the entry the user wrote, not the inner one
                kwargs[param] = self.load(inner_spec, label=label or (spec.name, f"kwargs.{param}"))
            missing = check_weights(spec, cls, kwargs)  # weights other than the lock's: refused here
            with hub_offline() if missing is not None else contextlib.nullcontext():
                # a hub file absent and out of reach: one error, raised once the options are checked (offline, no wait)
                try:
                    instance = cls.named(
                        spec.reward_model.lower(),
                        model_path=spec.model_path,
                        device=resolved.device,
                        dtype=resolved.dtype,
                        **kwargs,
                    )
                except Exception as exc:
                    if missing is None or (isinstance(exc, ConfigError) and (exc.field or "").startswith("kwargs.")):
                        raise
                    raise missing from None
        except ConfigError as exc:
            if exc.entry is not None:
                raise
            raise ConfigError(exc.message, entry=spec.name, field=exc.field) from exc
        except RewardZooError:
            raise
        except (TypeError, ValueError) as exc:  # a constructor refusing its options: name the entry
            raise ConfigError(f"{cls.__name__} could not be built: {exc}", entry=spec.name) from exc
        except (
            pickle.UnpicklingError
        ) as exc:  # a library's torch.load(weights_only=True) refused a file: none of it ran
            raise ConfigError(
                f"a weights file under '{spec.model_path}' is not a plain tensor checkpoint; torch.load(weights_only="
                f"True) refused it ({refused_reason(exc)}): nothing in it was run; use safetensors weights",
                entry=spec.name,
                field="model_path",
            ) from None
        except RuntimeError as exc:
            if "PytorchStreamReader" not in str(exc):
                raise
            raise ConfigError(
                f"a weights file under '{spec.model_path}' is not a readable torch checkpoint (truncated or corrupt: "
                f"{str(exc).split('.')[0]})",
                entry=spec.name,
                field="model_path",
            ) from None
        check_kind(instance)
        for param in inner:  # a composite holds the inner rewards it was given (their weights sleep with it)
            instance.resources.hold(kwargs[param])
        instance.info = resolved.record
        if spec.limits:
            instance.inputs = instance.inputs.with_limits(spec.limits)
        self.constructions += 1
        return instance


_RESERVED = ("self", "model_path", "device", "dtype")


def dtype_for(spec: RewardSpec, device: str, card: RewardInfo | None) -> str:
    """The dtype a spec's reward runs in: the configured one, or for ``auto`` (the default) its model
    ``card``'s ``default_dtype`` on ``device``'s kind (the reference's precision there; a ``default_dtype_when`` row
    the entry's kwargs select), else float32."""
    if spec.dtype != "auto":
        return spec.dtype
    return card.dtype_on(device, spec.kwargs) if card is not None else "float32"


def device_for(spec: RewardSpec, card: RewardInfo | None) -> str:
    """The device a spec's reward runs on, checked against this machine and against the devices its
    model ``card`` says it can use (``auto`` picks CUDA only for a reward that can use it)."""
    requested = requested_device(spec, card)
    try:
        return check_device(resolve_device(requested))
    except ValueError as exc:
        raise ConfigError(str(exc), entry=spec.name, field="device") from None


def requested_device(spec: RewardSpec, card: RewardInfo | None) -> str:
    """The device ``spec`` asks for, checked against its model ``card``'s devices but not against this machine:
    ``auto`` stays ``auto`` unless the card rules CUDA out (then ``cpu``)."""
    kinds = card.devices if card is not None else None
    requested = spec.device
    if requested == "auto" and kinds is not None and "cuda" not in kinds:
        requested = "cpu"  # also spares a CPU-only reward the torch import
    if kinds is not None and requested != "auto" and requested.split(":")[0] not in kinds:
        raise ConfigError(
            f"'{spec.reward_model}' runs on {' or '.join(kinds)} only (its model card's devices); "
            f"remove device: {spec.device} or set it to {kinds[0]}",
            entry=spec.name,
            field="device",
        )
    return requested


def _check_options(cls: type[Reward], kwargs: dict[str, Any], inner: dict[str, Any]) -> None:
    """The configured options, checked against the reward's declared ``Options`` before anything is loaded (inner
    rewards as the entries they are at this point)."""
    if cls.Options is RewardOptions:  # a class declaring no Options: its constructor's parameters are its options
        params = _init_params(cls)
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            known_options(cls.__name__, kwargs, [p for p in params if p not in _RESERVED and p not in inner])
        return
    cls.Options.from_kwargs({**kwargs, **inner}, cls.__name__)


def _init_params(cls: type[Any]) -> dict[str, inspect.Parameter]:
    init: Any = cls.__init__  # the class's own constructor, read from the class (not an instance)
    return dict(inspect.signature(init).parameters)
