"""Build reward instances from specs, each unique model exactly once per process.

Two specs share an instance when they resolve to the same *model identity*: implementation, weights
(``model_path``), dtype, resolved device and constructor kwargs. Stream-level settings (name, weight,
batch size, datasets, async) are not part of it, so a training and an evaluation spec of the same
model share one loaded copy.
"""

from __future__ import annotations

import inspect
import json
import threading
from typing import Any, Hashable

from .config import RewardSpec, parse_spec
from .errors import ConfigError, RegistryError, RewardZooError, did_you_mean
from .registry import canonical_target, resolve
from .rewards.base import Reward
from .shared.device import resolve_device


class RewardLoader:
    """Cache of constructed rewards keyed by model identity.

    ``constructions`` counts the models built (a test checks dedup with it). A reward class whose
    constructor has a ``loader`` parameter receives this loader, so it can build inner rewards (e.g. a
    groupwise wrapper's base) that share instances with every other spec.
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
        return (canonical_target(spec.reward_model), spec.model_path, spec.dtype, resolve_device(spec.device), kwargs)

    def load(self, spec: RewardSpec | dict | str) -> Reward:
        """The shared instance for ``spec``, constructing it on first use."""
        spec = parse_spec(spec) if not isinstance(spec, RewardSpec) else spec
        key = self.identity(spec)
        with self._lock:
            if key not in self._instances:
                self._instances[key] = self._construct(spec, device=key[3])
            return self._instances[key]

    def load_all(self, specs) -> list[Reward]:
        return [self.load(spec) for spec in specs]

    @property
    def instances(self) -> list[Reward]:
        return list(self._instances.values())

    def _construct(self, spec: RewardSpec, device: str) -> Reward:
        cls = resolve(spec.reward_model)
        if not (isinstance(cls, type) and issubclass(cls, Reward)):
            raise RegistryError(f"'{spec.reward_model}' resolves to {cls!r}, which is not a rewardzoo Reward subclass")
        kwargs: dict[str, Any] = dict(spec.kwargs)
        params = _init_params(cls)
        if "loader" in params:
            kwargs["loader"] = self
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            for key in spec.kwargs:
                if key not in params or key in ("self", "model_path", "device", "dtype", "loader"):
                    options = [p for p in params if p not in ("self", "model_path", "device", "dtype", "loader")]
                    raise ConfigError(f"{cls.__name__} has no option '{key}'{did_you_mean(key, options)}; "
                                      f"options: {', '.join(options) or 'none'}", entry=spec.name, field="kwargs")
        try:
            instance = cls(model_path=spec.model_path, device=device, dtype=spec.dtype, **kwargs)
        except ConfigError as exc:
            if exc.entry is not None:
                raise
            raise ConfigError(exc.message, entry=spec.name, field=exc.field) from exc
        except RewardZooError:
            raise
        except (TypeError, ValueError) as exc:  # a constructor refusing its options: name the entry
            raise ConfigError(f"{cls.__name__} could not be built: {exc}", entry=spec.name) from exc
        instance.name = spec.reward_model.lower()
        self.constructions += 1
        return instance


def _init_params(cls: type) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(cls.__init__).parameters)
