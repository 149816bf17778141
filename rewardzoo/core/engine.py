"""The scoring engine: the way a sample travels from the trainer to validated scores.

For each configured reward stream:

1. **gate** — samples whose ``dataset`` the stream does not apply to are skipped (NaN, not applied);
2. **check** — every declared field must be present on every applicable sample;
3. **convert** — media become what the reward's :class:`~rewardzoo.rewards.base.Inputs` ask for, once
   per sample and conversion (rewards with the same needs share the converted value);
4. **call** — pointwise rewards in chunks of at most ``batch_size``; groupwise rewards once per
   complete group (by ``group_id``);
5. **validate** — one finite score per input, in order, within the reward's declared score range;
6. **assemble** — float32 vectors with NaN where not applicable, the applied list per sample and the
   weighted total over applicable rewards.

:func:`score_specs` runs steps 1-5 for the local specs of a batch; within one call the streams that can run
beside the others (an ``io_bound`` reward such as a served one or an endpoint judge, an entry with
``async_reward: true``) run on threads of their own, started first, with the result and the error of the
calls one by one. The front ends — the synchronous
:class:`~rewardzoo.core.processor.RewardProcessor`, the incremental
:class:`~rewardzoo.core.async_runner.AsyncRewardRunner` and the cross-rank
:class:`~rewardzoo.core.distributed.DistributedRewardProcessor` — only choose how the calls (jobs) run:
inline, on worker threads, or exchanged between ranks (the executors of :mod:`rewardzoo.core.batching`, whose
:class:`~rewardzoo.core.batching.Assembler` cuts every front end's calls); a :class:`Scoring` says which.
:class:`ConversionCache` and :func:`call_reward` are safe to use from several threads.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import numpy as np

from ..errors import ConfigError, InputError, RewardExecutionError, RewardOutputError, RewardZooError, did_you_mean
from ..rewards.base import Reward, invoke, is_text_extra, validate_scores
from ..shared.device import DeviceStreams
from ..shared.groups import GroupKey, group_members
from ..spec.config import RewardSpec, StreamSpec
from ..spec.sample import Sample
from .batching import Assembler, run_inline
from .deadlines import ABSTAINED, abstained_mask, guard
from .fields import convert_field, owns_memory, protected

Outcome = tuple[np.ndarray, dict[str, np.ndarray]]
Job = Callable[[], Outcome]
#: ``run_jobs(spec, reward, jobs) -> outcomes in order``: how a front end runs a stream's calls (its executor).
RunJobs = Callable[[RewardSpec, Reward, Sequence[Job]], list[Outcome]]


@dataclass(frozen=True)
class Scoring:
    """How a front end has a batch scored (:meth:`~rewardzoo.core.processor.RewardProcessor.score_into`).

    ``skip``: the streams the caller scores itself (gated, not called); ``run_jobs``: the executor of a
    stream's prepared calls (:func:`~rewardzoo.core.batching.run_inline`, the runner's worker threads);
    ``error``: a failure the caller already had, raised after any collective step (every rank still reaches
    the exchange); ``finish()``: the caller's remaining work (e.g. waiting for its workers), run once the
    local scoring is done (across ranks, before the last round, so that its errors reach the other ranks).
    """

    skip: Collection[str] = ()
    run_jobs: RunJobs = run_inline
    error: BaseException | None = None
    finish: Callable[[], None] | None = None


@dataclass
class RewardResult:
    """Scores of one batch of samples.

    ``rewards[name]``: float32 (N,), NaN where the reward does not apply; ``applied[i]``: names of the
    rewards applied to sample i, in config order; ``total``: float32 (N,), the weighted sum over the
    applied rewards (NaN when none applies); ``extras[name][key]``: per-sample diagnostics a reward
    reported: float32 with NaN where not applicable, or, for a text extra (an ASR transcript), an object
    array of strings with None there.
    """

    rewards: dict[str, np.ndarray]
    total: np.ndarray
    applied: list[list[str]]
    extras: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    #: ``weights[name]``: float32 (N,), each reward's weight in each sample's total (0 where not applied).
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    #: The samples' ``group_id`` values (None where a sample has none).
    group_ids: list[Any] = field(default_factory=list)
    #: The default of :meth:`advantages` (the config's ``advantage:``).
    advantage_mode: str = "sum"
    #: The trainer step the weights were read at (``processor(samples, step=...)``; None when not given).
    step: int | None = None
    #: ``streams[name][stream]``: float32 (N,), the raw values of an entry's named streams (``streams:``, see
    #: :mod:`rewardzoo.core.streams`), NaN where not applied; such an entry adds these to ``total``, not its score.
    streams: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    #: ``stream_weights[name][stream]``: float32 (N,), the entry's weight times the stream's (0 where not applied).
    stream_weights: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    #: ``stream_settings[name][stream]``: the stream's setting (weight and normalisation) as configured.
    stream_settings: dict[str, dict[str, StreamSpec]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.total)

    def __repr__(self) -> str:
        # short and cheap: the dataclass repr printed every array, ~0.25 ms a result (CPython 3.11's asyncio.run
        # reprs the task's result on its way out, so a coroutine returning 64 results paid ~1.6 ms for it)
        head = ", ".join(f"{x:.4g}" for x in self.total[:4].tolist()) + (", ..." if len(self) > 4 else "")
        return f"RewardResult({len(self)} samples, rewards={list(self.rewards)}, total=[{head}])"

    def advantages(
        self,
        mode: str | None = None,
        group_by: Sequence[Any] | None = None,
        gather: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> np.ndarray:
        """Group-relative advantages, float32 (N,): ``mode`` ``"sum"`` (normalise the weighted total in
        each group, as flow_grpo), ``"gdpo"`` (normalise each reward in each group, then the weighted
        sum, as Flow-Factory) or ``"pref_grpo"`` (``gdpo`` with unbiased stds, renormalised over every rank's
        samples, as Pref-GRPO's scripts); see :mod:`rewardzoo.core.advantages`. Groups are the samples'
        ``group_id``, or ``group_by`` (one key per sample, e.g. the prompts). ``gather`` (``pref_grpo``): this
        rank's values -> every rank's (default: torch.distributed's all-gather when it runs with several ranks,
        so every rank must call this). Never NaN: unscored samples get 0."""
        from ..spec.config import check_mode
        from .advantages import group_index, normalize_then_sum, sum_then_normalize

        mode = check_mode(self.advantage_mode if mode is None else mode, "mode")
        keys = self.group_ids if group_by is None else list(group_by)
        if len(keys) != len(self):
            raise InputError(f"group_by has {len(keys)} keys for {len(self)} samples", field="group_by")
        groups = group_index(keys)
        if self.stream_settings:
            return self._stream_advantages(mode, keys, groups, gather)
        if mode == "sum":
            out = sum_then_normalize(self.total.astype(np.float64), groups)
        else:
            out = normalize_then_sum(
                {k: v.astype(np.float64) for k, v in self.rewards.items()},
                {k: v.astype(np.float64) for k, v in self.weights.items()},
                groups,
                mode,
                gather,
            )
        return out.astype(np.float32)

    def _stream_advantages(
        self, mode: str, keys: Sequence[Any], groups: np.ndarray, gather: Callable[[np.ndarray], np.ndarray] | None
    ) -> np.ndarray:
        """:meth:`advantages` with named streams (see :mod:`rewardzoo.core.streams`)."""
        from .advantages import normalize_then_sum, sum_then_normalize
        from .streams import combine

        def wide(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {k: v.astype(np.float64) for k, v in arrays.items()}

        if mode == "sum":
            raw, normalised, _ = combine(
                wide(self.rewards),
                wide(self.weights),
                {k: wide(v) for k, v in self.streams.items()},
                {k: wide(v) for k, v in self.stream_weights.items()},
                self.stream_settings,
                keys,
            )
            summed: np.ndarray = (sum_then_normalize(raw, groups) + normalised).astype(np.float32)
            return summed
        parts = {k: v for k, v in wide(self.rewards).items() if k not in self.stream_settings}
        weights = {k: v for k, v in wide(self.weights).items() if k not in self.stream_settings}
        for name, per_stream in self.stream_settings.items():
            for stream in per_stream:
                parts[f"{name}.{stream}"] = self.streams[name][stream].astype(np.float64)
                weights[f"{name}.{stream}"] = self.stream_weights[name][stream].astype(np.float64)
        out: np.ndarray = normalize_then_sum(parts, weights, groups, mode, gather).astype(np.float32)
        return out

    @property
    def substitutions(self) -> dict[str, int]:
        """Per reward, the scores a judge substituted for failed answers (``on_failure: {substitute: ...}``):
        the sum of its per-sample extra ``substituted`` (a pairwise judge counts each sample's substituted
        comparisons). Rewards without that extra are not listed."""
        return {
            name: int(np.nansum(extra["substituted"]))
            for name, extra in self.extras.items()
            if "substituted" in extra and not is_text_extra(extra["substituted"])
        }

    @property
    def abstentions(self) -> dict[str, int]:
        """Per optional entry, the samples it abstained for (its calls missed their ``timeout_s``): the sum of its
        per-sample extra ``abstained``, as :attr:`substitutions` counts a judge's. Entries without it are not listed."""
        return {name: len(rows) for name, rows in self.abstained.items()}

    @property
    def abstained(self) -> dict[str, list[int]]:
        """Per optional entry that abstained, the indices of those samples (NaN in its column, out of the total);
        see :mod:`rewardzoo.core.deadlines`."""
        return {
            name: np.flatnonzero(abstained_mask(extra, len(self))).tolist()
            for name, extra in self.extras.items()
            if ABSTAINED in extra
        }

    @property
    def unscored(self) -> list[int]:
        """Indices of the samples no reward applied to (total NaN)."""
        return [i for i, names in enumerate(self.applied) if not names]

    def records(self) -> list[dict[str, Any]]:
        """One JSON-ready dict per sample: ``{"rewards": {name: float|None}, "total": float|None, "applied": [...]}``."""
        out = []
        for i in range(len(self)):
            out.append(
                {
                    "rewards": {k: _json_number(v[i]) for k, v in self.rewards.items()},
                    "total": _json_number(self.total[i]),
                    "applied": list(self.applied[i]),
                }
            )
        return out


def _json_number(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def as_samples(samples: Iterable[Sample | Mapping[str, Any]], *, start: int = 0) -> list[Sample]:
    """Accept Sample objects or manifest-like dicts; errors name ``start`` + the position."""
    if isinstance(samples, (Sample, Mapping, str, bytes)) or not isinstance(samples, Iterable):
        raise InputError(f"pass a list of samples, got a {type(samples).__name__}; e.g. processor([Sample(...)])")
    out = []
    for i, s in enumerate(samples, start=start):
        if not isinstance(s, (Sample, Mapping)):
            raise InputError(
                f"each sample is a Sample or a mapping of its fields, got {type(s).__name__} {s!r:.60}; "
                "e.g. Sample(image='a.png', prompt='a cat')",
                sample=i,
            )
        try:
            out.append(s if isinstance(s, Sample) else Sample.from_dict(dict(s)))
        except InputError as exc:
            raise exc.located(sample=i) from None
    return out


class ConversionCache:
    """Converted field values for one call, shared between rewards that want the same conversion.

    Thread-safe: worker threads asking for the same conversion wait for one another, so each value is
    converted once. ``samples`` may grow while the cache is in use (the incremental runner appends).
    A front end that knows who will read a value says so (:meth:`expect`); the last expected read takes the
    value itself and the cache lets it go, so a converted image or clip is neither copied for its last reader
    nor held after it (a read past the expected ones converts again).
    """

    def __init__(self, samples: Sequence[Sample]):
        self.samples = samples
        self._values: dict[tuple[int, Hashable], Any] = {}
        self._locks: dict[tuple[int, Hashable], threading.Lock] = {}
        self._reads: dict[tuple[int, Hashable], int] = {}
        self._count_lock = threading.Lock()

    def expect(self, indices: Iterable[int], reward: Reward) -> None:
        """One read of each of ``reward``'s fields, for each of ``indices``, is to come."""
        keys = [reward.inputs.conversion_key(fld) for fld in reward.inputs.fields]
        with self._count_lock:
            for i in indices:
                for key in keys:
                    self._reads[(i, key)] = self._reads.get((i, key), 0) + 1

    def get(self, index: int, fld: str, reward: Reward, reward_name: str) -> Any:
        """The converted value for one reward call: its own copy or a read-only view (see ``protected``), or,
        for the last expected read, the value itself when it shares no memory with the sample's own value (a 720p
        video is then held once, not twice). Unexpected reads always get the copy or the view."""
        value = self._converted(index, fld, reward, reward_name)
        key = (index, reward.inputs.conversion_key(fld))
        # Copies are made under the lock: the last reader cannot take the value (and write over it) while
        # another thread still copies it.
        with self._count_lock:
            left = self._reads.get(key)
            if left is not None:
                self._reads[key] = left - 1
                if left == 1:
                    del self._reads[key]
                    self._values.pop(key, None)
                    if owns_memory(value, getattr(self.samples[index], fld)):
                        return value
            return protected(value)

    def _converted(self, index: int, fld: str, reward: Reward, reward_name: str) -> Any:
        wants = reward.inputs
        key = (index, wants.conversion_key(fld))
        try:
            return self._values[key]
        except KeyError:
            pass
        with self._locks.setdefault(key, threading.Lock()):  # setdefault is atomic under the GIL
            if key not in self._values:
                sample = self.samples[index]
                try:
                    self._values[key] = convert_field(fld, getattr(sample, fld), sample, wants)
                except InputError as exc:
                    raise exc.located(reward=reward_name, field=fld, sample=index) from None
                except RewardZooError:
                    raise
                except Exception as exc:  # a media backend failing: name the reward, field and sample
                    raise RewardExecutionError(
                        f"converting field '{fld}' failed: {type(exc).__name__}: {exc}",
                        reward=reward_name,
                        samples=[index],
                    ) from exc
            return self._values[key]


class ScoreTable:
    """Per-reward score vectors of one batch as they fill in; :meth:`result` assembles them."""

    def __init__(
        self,
        specs: Sequence[RewardSpec],
        samples: Sequence[Sample],
        advantage_mode: str = "sum",
        step: int | None = None,
    ) -> None:
        self.specs, self.samples, self.advantage_mode = specs, samples, advantage_mode
        self.step = check_step(step)
        self.scores: dict[str, np.ndarray] = {}
        self.masks: dict[str, np.ndarray] = {}
        self.extras: dict[str, dict[str, np.ndarray]] = {}

    def gate(self, spec: RewardSpec, reward: Reward) -> list[int]:
        """Applicable sample indices of ``spec`` (checked for its required fields); scores start as NaN."""
        mask = applicable_mask(spec, self.samples)
        self.masks[spec.name] = mask
        self.scores[spec.name] = np.full(len(self.samples), np.nan)
        indices: list[int] = np.flatnonzero(mask).tolist()
        check_required(spec.name, reward, self.samples, indices)
        check_weights(spec, self.samples, indices, self.step)
        return indices

    def put(self, name: str, indices: Sequence[int], scores: np.ndarray, extras: Mapping[str, np.ndarray]) -> None:
        self.scores[name][list(indices)] = scores
        for key, val in extras.items():
            spec_extras = self.extras.setdefault(name, {})
            empty = (
                np.full(len(self.samples), None, dtype=object)
                if is_text_extra(val)
                else np.full(len(self.samples), np.nan)
            )
            spec_extras.setdefault(key, empty)[list(indices)] = val

    def result(self) -> RewardResult:
        return assemble(self.specs, self.samples, self.scores, self.masks, self.extras, self.advantage_mode, self.step)


class ScoringFront(Protocol):
    """What a front end over the engine offers the incremental runner (:class:`~rewardzoo.core.processor.RewardProcessor`
    and its subclasses): its specs and loaded rewards, its default advantage mode, whether scoring is collective,
    and how it fills a table."""

    specs: tuple[RewardSpec, ...]
    rewards: dict[str, Reward]
    advantage: str

    @property
    def collective(self) -> bool: ...

    def wake(self) -> None: ...

    def phase_done(self) -> None: ...

    def with_pixels(self, samples: list[Sample], start: int = 0) -> list[Sample]: ...

    def score_into(self, table: ScoreTable, cache: ConversionCache, run: Scoring = Scoring()) -> None: ...


def score_specs(
    specs: Sequence[RewardSpec],
    rewards: Mapping[str, Reward],
    table: ScoreTable,
    cache: ConversionCache,
    run: Scoring = Scoring(),
    *,
    exchange_groups: bool = False,
    overlap: bool = True,
) -> dict[str, dict[Any, list[int]]]:
    """Score the local specs of a batch into ``table``: gate every spec, then call it (``run.run_jobs``
    runs the calls; ``run.error`` and ``run.finish`` are the front end's, not read here).

    Specs named in ``run.skip`` are gated but not called (their caller scores them). With
    ``exchange_groups`` the groupwise specs are not called either: their local groups
    (``{spec name: {group key: sample indices}}``) are returned for a cross-rank exchange.

    With ``overlap`` (the default), the streams that may run beside the others — an ``io_bound`` reward
    (a served reward, an endpoint judge) or an entry with ``async_reward: true`` — each run on a thread of
    their own (on CUDA, on their device's side stream, :class:`~rewardzoo.shared.device.DeviceStreams`),
    started first, while the other streams run on this thread (a lone stream runs on this thread, as before).
    The scores are those of the calls one by one (``overlap=False``), and so is the error: the one of the
    first failing stream in config order.
    """
    skip, run_jobs = set(run.skip), run.run_jobs
    local_groups: dict[str, dict[Any, list[int]]] = {}
    planned: list[tuple[int, RewardSpec, Reward, list[list[int]]]] = []
    errors: dict[int, BaseException] = {}
    for pos, spec in enumerate(specs):
        reward = rewards[spec.name]
        try:
            indices = table.gate(spec, reward)
            if exchange_groups and reward.kind == "groupwise":
                local_groups[spec.name] = group_indices(spec.name, table.samples, indices)
                continue
            if spec.name not in skip:
                planned.append((pos, spec, reward, call_plan(spec, reward, table.samples, indices)))
                cache.expect(indices, reward)  # the reads its calls will make (gathered groups read unplanned)
        except Exception as exc:  # one by one, the streams before this one would still be called
            errors[pos] = exc
            break
    background = {
        pos: _in_background(
            _stream_runner(spec, reward, plan, cache, run_jobs, side_stream=True), f"rewardzoo-overlap-{spec.name}"
        )
        for pos, spec, reward, plan in planned
        if overlap and len(planned) > 1 and overlaps(spec, reward)
    }
    outcomes: dict[int, list[Outcome]] = {}
    for pos, spec, reward, plan in planned:
        if pos in background or min(errors, default=pos) < pos:  # one by one, an earlier failure ends the call
            continue
        try:
            outcomes[pos] = _stream_runner(spec, reward, plan, cache, run_jobs, side_stream=False)()
        except Exception as exc:
            errors[pos] = exc
    for pos, future in background.items():
        try:
            outcomes[pos] = future.result()
        except Exception as exc:
            errors[pos] = exc
    if errors:
        raise errors[min(errors)]
    for pos, spec, _reward, plan in planned:
        for chunk, outcome in zip(plan, outcomes[pos]):
            table.put(spec.name, chunk, *outcome)
    return local_groups


def overlaps(spec: RewardSpec, reward: Reward) -> bool:
    """Whether a stream runs on a thread of its own in a processor call (see :func:`score_specs`)."""
    return spec.async_reward or reward.io_bound


#: The engine's CUDA side streams, one per device, for the overlapped streams of a processor call.
_STREAMS = DeviceStreams()


def _stream_runner(
    spec: RewardSpec,
    reward: Reward,
    plan: list[list[int]],
    cache: ConversionCache,
    run_jobs: RunJobs,
    *,
    side_stream: bool,
) -> Callable[[], list[Outcome]]:
    """The calls of one stream, run by ``run_jobs``; with ``side_stream``, a CUDA reward's on its device's
    side stream, after the work the caller had queued there so far (recorded now, on the caller's thread)."""
    jobs: list[Job] = [partial(run_call, spec.name, reward, chunk, cache) for chunk in plan]
    if side_stream and DeviceStreams.is_cuda(reward) and plan:
        device = str(reward.device)
        event = DeviceStreams.ready_events([device])[device]
        jobs = [partial(_STREAMS.call, job, device, event) for job in jobs]
    jobs = [guard(spec, reward, chunk, job) for chunk, job in zip(plan, jobs)]  # the entry's timeout_s
    return partial(run_jobs, spec, reward, jobs)


def _in_background(fn: Callable[[], Any], name: str) -> cf.Future[Any]:
    """``fn()`` on a daemon thread of its own (it never keeps the process from exiting); its future."""
    future: cf.Future[Any] = cf.Future()

    def work() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn())
        except BaseException as exc:  # delivered to the caller waiting on the future
            future.set_exception(exc)

    threading.Thread(target=work, name=name, daemon=True).start()
    return future


def applicable_mask(spec: RewardSpec, samples: Sequence[Sample]) -> np.ndarray:
    return np.fromiter((spec.applies_to(s.dataset) for s in samples), dtype=bool, count=len(samples))


def check_required(name: str, reward: Reward, samples: Sequence[Sample], indices: Iterable[int]) -> None:
    """Every declared field must be present on every sample the reward applies to."""
    for i in indices:
        for fld in reward.inputs.fields:
            if getattr(samples[i], fld, None) is None:
                hint = (
                    " (the sample has a latent: add a decode stage to the config, `decode: {vae: ...}`)"
                    if fld in ("image", "video") and getattr(samples[i], "latent", None) is not None
                    else ""
                )
                raise InputError(f"missing required field{hint}", reward=name, field=fld, sample=i)


def check_step(step: Any) -> int | None:
    """A trainer step: None or an integer >= 0 (numpy integers too); InputError naming ``step`` otherwise."""
    if step is None:
        return None
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise InputError(f"the trainer step must be an integer >= 0 or None, got {step!r}", field="step")
    return int(step)


def check_weights(spec: RewardSpec, samples: Sequence[Sample], indices: Iterable[int], step: int | None = None) -> None:
    """With per-dataset weights, every sample the reward applies to must have a weight (0 is one):
    a misspelt key would otherwise weigh the reward 0 silently. A scheduled weight needs the step."""
    if step is None and spec.scheduled:
        raise ConfigError(
            "the weight follows a schedule over the trainer's step; pass the step "
            "(processor(samples, step=...); the trainer adapters pass their global step)",
            entry=spec.name,
            field="weight",
        )
    if not isinstance(spec.weight, Mapping):
        return
    for i in indices:
        dataset = samples[i].dataset
        if dataset not in spec.weight:
            raise InputError(
                f"dataset {dataset!r} has no weight in entry '{spec.name}' (weights for "
                f"{sorted(spec.weight)}){did_you_mean(str(dataset), spec.weight)}; give it one (0 to score "
                "without counting it) or limit the entry with applicable_datasets",
                reward=spec.name,
                field="dataset",
                sample=i,
            )


def unscored(specs: Sequence[RewardSpec], samples: Sequence[Sample]) -> list[int]:
    """Indices of the samples that no spec applies to (their total would be null)."""
    return [i for i, s in enumerate(samples) if not any(spec.applies_to(s.dataset) for spec in specs)]


def stream_assembler(spec: RewardSpec, reward: Reward, group_size: int | None = None) -> Assembler[int]:
    """The :class:`~rewardzoo.core.batching.Assembler` of a stream's sample indices: pointwise chunks of at
    most ``batch_size``, or groups (complete at ``group_size`` members when given, a larger one an error)."""
    if reward.kind == "groupwise":
        return Assembler(groupwise=True, group_size=group_size, strict=True)
    return Assembler(spec.batch_size)


def call_plan(spec: RewardSpec, reward: Reward, samples: Sequence[Sample], indices: list[int]) -> list[list[int]]:
    """The index lists of the calls: pointwise chunks of at most batch_size, or one list per group."""
    if reward.kind == "groupwise":
        return list(group_indices(spec.name, samples, indices).values())
    return stream_assembler(spec, reward).plan(indices)


def group_indices(name: str, samples: Sequence[Sample], indices: Iterable[int]) -> dict[GroupKey, list[int]]:
    """group_id -> sample indices, in order of first appearance; keys are ``(type name, value)``
    (:func:`~rewardzoo.shared.groups.group_key`)."""

    def missing(i: int) -> InputError:
        return InputError("groupwise reward needs a group_id on every sample", reward=name, field="group_id", sample=i)

    return group_members(((i, samples[i].group_id) for i in indices), missing)


def build_fields(name: str, reward: Reward, indices: Sequence[int], cache: ConversionCache) -> dict[str, list[Any]]:
    """Keyword arguments of one reward call: each declared field as a list over ``indices``."""
    fields: dict[str, list[Any]] = {}
    for fld in reward.inputs.fields:
        values = [cache.get(i, fld, reward, name) for i in indices]
        if fld in ("audio", "condition_audio"):
            fields[fld] = [v[0] for v in values]
            fields[f"{fld}_sample_rate"] = [v[1] for v in values]
        elif fld == "video" and reward.inputs.frame_rate:
            fields[fld] = [v[0] for v in values]
            fields["video_fps"] = [v[1] for v in values]
        else:
            fields[fld] = values
    return fields


def run_call(name: str, reward: Reward, indices: Sequence[int], cache: ConversionCache) -> Outcome:
    """One reward call over ``indices``: convert the declared fields, call, validate."""
    return call_reward(name, reward, build_fields(name, reward, indices, cache), indices)


def call_reward(name: str, reward: Reward, fields: dict[str, list[Any]], indices: Sequence[int]) -> Outcome:
    """Call a reward (:func:`~rewardzoo.rewards.base.invoke`) and validate its output, score range
    included; errors carry the stream name and the caller's sample indices."""
    try:
        output = invoke(reward, fields)
        return validate_scores(output, len(indices), name, reward.info.score_range)
    except (InputError, RewardOutputError, RewardExecutionError) as exc:
        located = exc.located(reward=name, indices=indices)
        if located is exc:  # already names its samples (e.g. from an inner call)
            raise
        raise located from exc
    except RewardZooError:
        raise
    except Exception as exc:  # a backend failure: name the reward and the call's samples, keep the cause
        raise RewardExecutionError(f"{type(exc).__name__}: {exc}", reward=name, samples=indices) from exc


def assemble(
    specs: Sequence[RewardSpec],
    samples: Sequence[Sample],
    scores: Mapping[str, np.ndarray],
    masks: Mapping[str, np.ndarray],
    extras: Mapping[str, dict[str, np.ndarray]] | None = None,
    advantage_mode: str = "sum",
    step: int | None = None,
) -> RewardResult:
    """Combine per-reward scores (float64, NaN where not applicable) into a :class:`RewardResult`; scheduled
    weights are read at ``step``."""
    n = len(samples)
    applied: list[list[str]] = [[] for _ in range(n)]
    weights64: dict[str, np.ndarray] = {}
    streams: dict[str, dict[str, np.ndarray]] = {}
    stream_weights: dict[str, dict[str, np.ndarray]] = {}
    masks = {k: v & ~abstained_mask((extras or {}).get(k), n) for k, v in masks.items()}  # optional entries' misses
    for spec in specs:
        mask = masks[spec.name]
        weights64[spec.name] = np.zeros(n)
        if mask.any():
            weights64[spec.name] = np.array(
                [spec.weight_for(s.dataset, step) if m else 0.0 for s, m in zip(samples, mask)]
            )
            for i in np.flatnonzero(mask):
                applied[i].append(spec.name)
        if spec.streams is not None:
            reported = (extras or {}).get(spec.name, {})
            streams[spec.name], stream_weights[spec.name] = {}, {}
            for stream, setting in spec.streams.items():
                values = reported.get(stream)
                if values is None or is_text_extra(values):
                    if mask.any():
                        raise RewardOutputError(
                            f"the entry weighs stream '{stream}', which the reward did not report as a number",
                            reward=spec.name,
                        )
                    values = np.full(n, np.nan)
                streams[spec.name][stream] = np.where(mask, np.asarray(values, dtype=np.float64), np.nan)
                stream_weights[spec.name][stream] = weights64[spec.name] * setting.weight
    rewards = {k: np.asarray(v, dtype=np.float64) for k, v in scores.items()}
    settings = {spec.name: dict(spec.streams) for spec in specs if spec.streams is not None}
    if settings:
        from .streams import combine

        raw, normalised, scored = combine(
            rewards,
            weights64,
            streams,
            stream_weights,
            settings,
            [s.group_id for s in samples],
        )
        total = np.where(scored, np.nan_to_num(raw) + normalised, np.nan)
    else:
        total = np.zeros(n)
        for spec in specs:
            mask = masks[spec.name]
            total[mask] += weights64[spec.name][mask] * rewards[spec.name][mask]
        total[np.array([not names for names in applied], dtype=bool)] = np.nan
    return RewardResult(
        rewards={k: v.astype(np.float32) for k, v in scores.items()},
        total=total.astype(np.float32),
        applied=applied,
        extras={
            k: {kk: vv if is_text_extra(vv) else vv.astype(np.float32) for kk, vv in v.items()}
            for k, v in (extras or {}).items()
        },
        weights={k: v.astype(np.float32) for k, v in weights64.items()},
        group_ids=[s.group_id for s in samples],
        advantage_mode=advantage_mode,
        step=step,
        streams={k: {kk: vv.astype(np.float32) for kk, vv in v.items()} for k, v in streams.items()},
        stream_weights={k: {kk: vv.astype(np.float32) for kk, vv in v.items()} for k, v in stream_weights.items()},
        stream_settings=settings,
    )
