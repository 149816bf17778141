"""The synchronous processor: the way a sample travels from the trainer to validated scores.

For each configured reward stream:

1. **gate** — samples whose ``dataset`` the stream does not apply to are skipped (NaN, not applied);
2. **check** — every declared field must be present on every applicable sample;
3. **convert** — media become what the reward asked for (PIL/NumPy or tensors), once per sample and
   conversion (rewards with the same needs share the converted value);
4. **call** — pointwise rewards in chunks of at most ``batch_size``; groupwise rewards once per
   complete group (by ``group_id``);
5. **validate** — one finite score per input, in order;
6. **assemble** — float32 vectors with NaN where not applicable, the applied list per sample and the
   weighted total over applicable rewards.

The steps are module-level functions so that the incremental runner (``async_runner.py``) and the
cross-rank path (``distributed.py``) reuse them instead of copying them. :class:`ConversionCache` and
:func:`call_reward` are safe to use from several threads; a reward whose class sets
``thread_safe = False`` is called by one thread at a time (one lock per instance).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from .config import RewardSpec, parse_specs
from .errors import InputError, RewardExecutionError, RewardZooError
from .loader import RewardLoader
from .rewards.base import Reward, validate_scores
from .sample import Sample
from .shared.fields import conversion_key, convert_field


@dataclass
class RewardResult:
    """Scores of one batch of samples.

    ``rewards[name]``: float32 (N,), NaN where the reward does not apply; ``applied[i]``: names of the
    rewards applied to sample i, in config order; ``total``: float32 (N,), the weighted sum over the
    applied rewards (NaN when none applies); ``extras[name][key]``: per-sample diagnostics a reward
    reported (NaN where not applicable).
    """

    rewards: dict[str, np.ndarray]
    total: np.ndarray
    applied: list[list[str]]
    extras: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.total)

    def records(self) -> list[dict[str, Any]]:
        """One JSON-ready dict per sample: ``{"rewards": {name: float|None}, "total": float|None, "applied": [...]}``."""
        out = []
        for i in range(len(self)):
            out.append({"rewards": {k: _json_number(v[i]) for k, v in self.rewards.items()},
                        "total": _json_number(self.total[i]), "applied": list(self.applied[i])})
        return out


def _json_number(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def as_samples(samples: Iterable[Sample | Mapping[str, Any]]) -> list[Sample]:
    """Accept Sample objects or manifest-like dicts."""
    out = []
    for i, s in enumerate(samples):
        try:
            out.append(s if isinstance(s, Sample) else Sample.from_dict(dict(s)))
        except InputError as exc:
            raise exc.located(sample=i) from None
    return out


class ConversionCache:
    """Converted field values for one call, shared between rewards that want the same conversion.

    Thread-safe: worker threads asking for the same conversion wait for one another, so each value is
    converted once. ``samples`` may grow while the cache is in use (the incremental runner appends).
    """

    def __init__(self, samples: Sequence[Sample]):
        self.samples = samples
        self._values: dict[tuple[int, Hashable], Any] = {}
        self._locks: dict[tuple[int, Hashable], threading.Lock] = {}

    def get(self, index: int, fld: str, reward: Reward, reward_name: str) -> Any:
        key = (index, conversion_key(fld, reward))
        try:
            return self._values[key]
        except KeyError:
            pass
        with self._locks.setdefault(key, threading.Lock()):  # setdefault is atomic under the GIL
            if key not in self._values:
                sample = self.samples[index]
                try:
                    self._values[key] = convert_field(fld, getattr(sample, fld), sample, reward)
                except InputError as exc:
                    raise exc.located(reward=reward_name, field=fld, sample=index) from None
                except RewardZooError:
                    raise
                except Exception as exc:  # a media backend failing: name the reward, field and sample
                    raise RewardExecutionError(f"converting field '{fld}' of sample {index} failed: "
                                               f"{type(exc).__name__}: {exc}", reward=reward_name) from exc
            return self._values[key]


class ScoreTable:
    """Per-reward score vectors of one batch as they fill in; :meth:`result` assembles them."""

    def __init__(self, specs: Sequence[RewardSpec], samples: Sequence[Sample]) -> None:
        self.specs, self.samples = specs, samples
        self.scores: dict[str, np.ndarray] = {}
        self.masks: dict[str, np.ndarray] = {}
        self.extras: dict[str, dict[str, np.ndarray]] = {}

    def gate(self, spec: RewardSpec, reward: Reward) -> list[int]:
        """Applicable sample indices of ``spec`` (checked for its required fields); scores start as NaN."""
        mask = applicable_mask(spec, self.samples)
        self.masks[spec.name] = mask
        self.scores[spec.name] = np.full(len(self.samples), np.nan)
        indices = np.flatnonzero(mask).tolist()
        check_required(spec.name, reward, self.samples, indices)
        return indices

    def put(self, name: str, indices: Sequence[int], scores: np.ndarray, extras: Mapping[str, np.ndarray]) -> None:
        self.scores[name][list(indices)] = scores
        for key, val in extras.items():
            spec_extras = self.extras.setdefault(name, {})
            spec_extras.setdefault(key, np.full(len(self.samples), np.nan))[list(indices)] = val

    def result(self) -> "RewardResult":
        return assemble(self.specs, self.samples, self.scores, self.masks, self.extras)


class RewardProcessor:
    """Score samples with a list of reward specs; each unique model is loaded once (through ``loader``).

    >>> proc = RewardProcessor(load_config("configs/jpeg.yaml").rewards)   # doctest: +SKIP
    >>> result = proc([Sample(image="a.png", prompt="a cat")])             # doctest: +SKIP
    """

    def __init__(self, specs: Sequence[RewardSpec | Mapping | str], loader: RewardLoader | None = None) -> None:
        self.specs: tuple[RewardSpec, ...] = parse_specs(list(specs))
        self.loader = loader or RewardLoader()
        self.rewards: dict[str, Reward] = {spec.name: self.loader.load(spec) for spec in self.specs}

    def __call__(self, samples: Iterable[Sample | Mapping[str, Any]]) -> RewardResult:
        samples = as_samples(samples)
        cache = ConversionCache(samples)
        table = ScoreTable(self.specs, samples)
        for spec in self.specs:
            reward = self.rewards[spec.name]
            indices = table.gate(spec, reward)
            for chunk in call_plan(spec, reward, samples, indices):
                table.put(spec.name, chunk, *run_call(spec.name, reward, chunk, cache))
        return table.result()

    def incremental(self, *, timeout: float | None = None, group_size: int | None = None):
        """An :class:`~rewardzoo.async_runner.AsyncRewardRunner` over this processor (``add`` then ``finalize``)."""
        from .async_runner import AsyncRewardRunner

        return AsyncRewardRunner(self, timeout=timeout, group_size=group_size)


def applicable_mask(spec: RewardSpec, samples: Sequence[Sample]) -> np.ndarray:
    return np.fromiter((spec.applies_to(s.dataset) for s in samples), dtype=bool, count=len(samples))


def check_required(name: str, reward: Reward, samples: Sequence[Sample], indices: Iterable[int]) -> None:
    """Every declared field must be present on every sample the reward applies to."""
    for i in indices:
        for fld in reward.required_fields:
            if getattr(samples[i], fld, None) is None:
                raise InputError("missing required field", reward=name, field=fld, sample=i)


def call_plan(spec: RewardSpec, reward: Reward, samples: Sequence[Sample], indices: list[int]) -> list[list[int]]:
    """The index lists of the calls: pointwise chunks of at most batch_size, or one list per group."""
    if reward.kind == "groupwise":
        return list(group_indices(spec.name, samples, indices).values())
    return [indices[i:i + spec.batch_size] for i in range(0, len(indices), spec.batch_size)]


def group_indices(name: str, samples: Sequence[Sample], indices: Iterable[int]) -> dict[Any, list[int]]:
    """group_id -> sample indices, in order of first appearance."""
    groups: dict[Any, list[int]] = {}
    for i in indices:
        gid = samples[i].group_id
        if gid is None:
            raise InputError("groupwise reward needs a group_id on every sample", reward=name, field="group_id",
                             sample=i)
        groups.setdefault((type(gid).__name__, gid), []).append(i)
    return groups


def build_fields(name: str, reward: Reward, indices: Sequence[int], cache: ConversionCache) -> dict[str, list]:
    """Keyword arguments of one reward call: each declared field as a list over ``indices``."""
    fields: dict[str, list] = {}
    for fld in reward.required_fields:
        values = [cache.get(i, fld, reward, name) for i in indices]
        if fld == "audio":
            fields["audio"] = [v[0] for v in values]
            fields["audio_sample_rate"] = [v[1] for v in values]
        else:
            fields[fld] = values
    return fields


_CALL_LOCKS: "weakref.WeakKeyDictionary[Reward, threading.Lock]" = weakref.WeakKeyDictionary()
_CALL_LOCKS_GUARD = threading.Lock()


def instance_lock(reward: Reward) -> threading.Lock:
    """The lock serialising calls of one (not thread-safe) reward instance across every thread."""
    with _CALL_LOCKS_GUARD:
        try:
            lock = _CALL_LOCKS.get(reward)
            if lock is None:
                lock = _CALL_LOCKS[reward] = threading.Lock()
        except TypeError:  # an unhashable or slotted reward class: keep the lock on the instance
            lock = reward.__dict__.setdefault("_rewardzoo_call_lock", threading.Lock())
        return lock


def run_call(name: str, reward: Reward, indices: Sequence[int], cache: ConversionCache
             ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One reward call over ``indices``: convert the declared fields, call, validate."""
    return call_reward(name, reward, build_fields(name, reward, indices, cache), indices)


def call_reward(name: str, reward: Reward, fields: dict[str, list], indices: Sequence[int]
                ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Call a reward and validate its output; errors carry the stream name and global sample index.

    A reward whose class is not ``thread_safe`` is called under its instance lock.
    """
    try:
        if reward.thread_safe:
            output = reward(**fields)
        else:
            with instance_lock(reward):
                output = reward(**fields)
    except InputError as exc:
        local = exc.sample
        glob = indices[local] if local is not None and 0 <= local < len(indices) else None
        raise InputError(exc.message, reward=exc.reward or name, field=exc.field, sample=glob) from exc
    except RewardZooError:
        raise
    except Exception as exc:  # a backend failure: name the reward, keep the original as the cause
        raise RewardExecutionError(f"{type(exc).__name__}: {exc}", reward=name) from exc
    return validate_scores(output, len(indices), name)


def assemble(specs: Sequence[RewardSpec], samples: Sequence[Sample], scores: Mapping[str, np.ndarray],
             masks: Mapping[str, np.ndarray], extras: Mapping[str, dict[str, np.ndarray]] | None = None
             ) -> RewardResult:
    """Combine per-reward scores (float64, NaN where not applicable) into a :class:`RewardResult`."""
    n = len(samples)
    total = np.zeros(n)
    any_applied = np.zeros(n, dtype=bool)
    applied: list[list[str]] = [[] for _ in range(n)]
    for spec in specs:
        mask = masks[spec.name]
        if not mask.any():
            continue
        weights = np.array([spec.weight_for(s.dataset) for s in samples])
        total[mask] += weights[mask] * scores[spec.name][mask]
        any_applied |= mask
        for i in np.flatnonzero(mask):
            applied[i].append(spec.name)
    total[~any_applied] = np.nan
    return RewardResult(rewards={k: v.astype(np.float32) for k, v in scores.items()},
                        total=total.astype(np.float32), applied=applied,
                        extras={k: {kk: vv.astype(np.float32) for kk, vv in v.items()}
                                for k, v in (extras or {}).items()})
