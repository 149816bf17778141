"""Per-sample calls, batched: what the verl and verl-omni adapters share.

Their reward loops call the reward function once per sample, many calls at once. A
:class:`SampleGatherer` (one per reward stream) collects the calls that arrive together into one processor
call: a pointwise stream scores as soon as ``batch_size`` samples wait, or when the oldest has waited
``max_wait_s`` (a few milliseconds); a groupwise stream scores a group once its ``group_size`` members are
in (by ``group_id``: verl's ``uid``, verl-omni's group key), and fails its calls with an
:class:`~rewardzoo.errors.InputError` naming the group and its missing members after ``group_timeout_s``.
Each call gets its own sample's one-row :class:`~rewardzoo.core.engine.RewardResult`. When a batch fails,
its samples are scored again one by one (a group as a whole), so an error reaches the calls it belongs to
and the others get their scores. Calls of different trainer steps are never scored together.

:class:`BatchedScorer` holds the gatherers of a config's streams (one loader: each model built once) and
combines a sample's per-stream rows into one result. Calls may come from coroutines (``await
scorer.score(...)``) or threads (``scorer.score_sync(...)``); the scoring runs on one daemon thread per
stream, never on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.batching import Assembler, split_on_failure
from ..core.decode import decoder_for
from ..core.engine import RewardResult
from ..core.loader import RewardLoader
from ..core.processor import RewardProcessor
from ..errors import ConfigError, InputError
from ..shared.groups import group_key
from ..shared.options import positive_float, positive_int
from ..spec.config import RewardSpec
from ..spec.sample import Sample
from .common import combined_result

#: How long a call waits for more calls to share its batch, by default (seconds).
MAX_WAIT_S = 0.005
#: How long the first member of a group waits for the others, by default (seconds).
GROUP_TIMEOUT_S = 600.0


@dataclass
class _Call:
    sample: Sample
    step: int | None
    member: Hashable | None
    future: cf.Future | asyncio.Future = field(default_factory=cf.Future)
    arrived: float = field(default_factory=time.monotonic)
    #: the event loop of a coroutine's call (its ``future`` an asyncio future); None: a thread's call
    loop: asyncio.AbstractEventLoop | None = None


def result_row(result: RewardResult, i: int) -> RewardResult:
    """Row ``i`` of ``result`` as a one-sample result (copies: a caller may keep or change it)."""
    one = slice(i, i + 1)
    return RewardResult(
        rewards={k: v[one].copy() for k, v in result.rewards.items()},
        total=result.total[one].copy(),
        applied=[list(result.applied[i])],
        extras={k: {kk: vv[one].copy() for kk, vv in v.items()} for k, v in result.extras.items()},
        weights={k: v[one].copy() for k, v in result.weights.items()},
        group_ids=list(result.group_ids[one]),
        advantage_mode=result.advantage_mode,
        step=result.step,
        streams={k: {kk: vv[one].copy() for kk, vv in v.items()} for k, v in result.streams.items()},
        stream_weights={k: {kk: vv[one].copy() for kk, vv in v.items()} for k, v in result.stream_weights.items()},
        stream_settings={k: dict(v) for k, v in result.stream_settings.items()},
    )


class SampleGatherer:
    """Gathers per-sample calls of one reward stream into batched calls of a one-spec processor.

    ``submit(sample, step)`` returns a future of the sample's one-row result. Pointwise: up to the entry's
    ``batch_size`` samples per call, waiting at most ``max_wait_s`` for a batch to fill. Groupwise: a group
    (``sample.group_id``) is scored when ``group_size`` members are in; after ``group_timeout_s`` its calls fail
    with an error naming the group, the members that arrived and those missing (by ``member``: integers
    ``0..group_size-1`` are named missing one by one, other keys by count).
    """

    def __init__(
        self,
        processor: RewardProcessor,
        *,
        max_wait_s: float = MAX_WAIT_S,
        group_size: int | None = None,
        group_timeout_s: float = GROUP_TIMEOUT_S,
    ) -> None:
        if len(processor.specs) != 1:
            raise ConfigError(f"a gatherer scores one stream, got {len(processor.specs)}")
        self.processor = processor
        self.spec: RewardSpec = processor.specs[0]
        self.groupwise = processor.rewards[self.spec.name].kind == "groupwise"
        self.max_wait_s = positive_float(max_wait_s, "max_wait_s")
        self.group_timeout_s = positive_float(group_timeout_s, "group_timeout_s")
        self.group_size = positive_int(group_size, "group_size", allow_none=True)
        if self.groupwise and self.group_size is None:
            raise ConfigError(
                "a groupwise reward behind per-sample calls needs the group size (samples per prompt; "
                "verl: actor_rollout_ref.rollout.n) to know when a group is complete",
                entry=self.spec.name,
                field="group_size",
            )
        # the batch assembler: pointwise, one per trainer step (calls of different steps never share a
        # processor call); groupwise, one keyed by (group, step)
        self._chunks: dict[int | None, Assembler[_Call]] = {}
        self._groups: Assembler[_Call] = Assembler(groupwise=True, group_size=self.group_size)
        self._due: list[list[_Call]] = []  # calls the assemblers emitted, to be scored
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        #: processor calls made so far (what batching saves)
        self.calls = 0

    # ------------------------------------------------------------------------------------ callers
    def submit(self, sample: Sample, step: int | None = None, member: Hashable | None = None) -> cf.Future:
        """Queue one sample; the future's result is its one-row RewardResult (or the error of its call)."""
        future: cf.Future = cf.Future()
        self._queue(_Call(sample, step, member, future=future))
        return future

    def submit_async(
        self, sample: Sample, step: int | None = None, member: Hashable | None = None
    ) -> asyncio.Future[RewardResult]:
        """:meth:`submit` from a coroutine: an asyncio future of the running loop. A batch's results reach each
        loop in one callback (not one thread-safe wake-up of the loop per call)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RewardResult] = loop.create_future()
        self._queue(_Call(sample, step, member, future=future, loop=loop))
        return future

    def _queue(self, call: _Call) -> None:
        sample, step = call.sample, call.step
        with self._cond:
            due = len(self._due)
            if self.groupwise:
                if sample.group_id is None:
                    raise InputError(
                        "a groupwise reward needs a group_id on every sample (verl: the sample's uid)",
                        reward=self.spec.name,
                        field="group_id",
                    )
                key = (group_key(sample.group_id), step)
                opened = key not in self._groups.open_groups
                self._due.extend(self._groups.add(call, key=key))
            else:
                chunks = self._chunks.get(step)
                opened = chunks is None or not chunks.pending
                if chunks is None:
                    chunks = self._chunks[step] = Assembler(self.spec.batch_size)
                self._due.extend(chunks.add(call))
                if not chunks.pending:
                    del self._chunks[step]
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"rewardzoo-gather-{self.spec.name}", daemon=True
                )
                self._thread.start()
            # wake the scoring thread only when its wait changes: a batch became due, or a chunk (group) opened
            # and its max_wait_s (group_timeout_s) starts. Waking it for every call made it contend for the GIL
            # with the callers 64 times per batch of 64 (most of the gathered calls' fixed cost)
            if opened or len(self._due) > due:
                self._cond.notify()

    # ------------------------------------------------------------------------------ scoring thread
    def _run(self) -> None:
        while True:
            with self._cond:
                batches, expired = self._take()
                while not batches and not expired:
                    self._cond.wait(self._wait_time())
                    batches, expired = self._take()
            for key, calls in expired:
                self._expire(key, calls)
            for calls in batches:
                self._score(calls)

    def _oldest(self) -> tuple[int | None, _Call] | None:
        """The pointwise call waiting longest for its chunk, with its step (None: none waits)."""
        waiting = [(a.pending[0].arrived, step) for step, a in self._chunks.items() if a.pending]
        if not waiting:
            return None
        step = min(waiting, key=lambda w: w[0])[1]
        return step, self._chunks[step].pending[0]

    def _wait_time(self) -> float | None:
        """Seconds until the next batch or group is due (None: nothing waits)."""
        if self._due:
            return 0.0
        now = time.monotonic()
        if self.groupwise:
            firsts = [calls[0].arrived for calls in self._groups.open_groups.values()]
            return max(0.0, min(firsts) + self.group_timeout_s - now) if firsts else None
        oldest = self._oldest()
        return None if oldest is None else max(0.0, oldest[1].arrived + self.max_wait_s - now)

    def _take(self) -> tuple[list[list[_Call]], list[tuple[Hashable, list[_Call]]]]:
        """(batches due now, expired incomplete groups), removed from the assemblers (under the lock): full
        chunks and complete groups as the assemblers emitted them, a chunk whose oldest call waited
        ``max_wait_s``, the groups whose first member waited ``group_timeout_s``."""
        now = time.monotonic()
        batches, self._due = self._due, []
        if self.groupwise:
            open_groups = self._groups.open_groups
            expired = [k for k, calls in open_groups.items() if now - calls[0].arrived >= self.group_timeout_s]
            return batches, [(open_groups[k][0].sample.group_id, self._groups.pop(k)) for k in expired]
        oldest = self._oldest()
        if not batches and oldest is not None and now - oldest[1].arrived >= self.max_wait_s:
            batches = self._chunks.pop(oldest[0]).flush()  # one step per processor call (scheduled weights)
        return batches, []

    def _expire(self, group: Hashable, calls: list[_Call]) -> None:
        size = self.group_size
        if size is None:  # (only a groupwise stream, whose group_size is set, keeps groups)
            raise RuntimeError("a group expired in a stream without a group size")
        members = [c.member for c in calls]
        if all(isinstance(m, int) for m in members):
            missing = f"missing members {sorted(set(range(size)) - set(members))}"
        else:
            missing = f"{size - len(calls)} missing"
        error = InputError(
            f"group {group!r} has {len(calls)} of its {self.group_size} samples after "
            f"{self.group_timeout_s:g} s (arrived: {members}; {missing}); every sample of a group "
            "must reach the reward (check group_size)",
            reward=self.spec.name,
            field="group_id",
        )
        _settle(calls, [error] * len(calls))

    def _score(self, calls: list[_Call]) -> None:
        def run(batch: list[_Call]) -> list[RewardResult]:
            self.calls += 1
            result = self.processor([c.sample for c in batch], step=batch[0].step)
            return [result_row(result, i) for i in range(len(batch))]

        # a failed batch is scored again one by one (a group as a whole): each error reaches its own call
        _settle(calls, split_on_failure(run, calls, split=not self.groupwise))


def _settle(calls: Sequence[_Call], outcomes: Sequence[Any]) -> None:
    """Each call's result or error: a thread's future at once, the coroutines' futures in one callback per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, Any]]] = {}
    for call, outcome in zip(calls, outcomes):
        if call.loop is None:
            future: Any = call.future
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        else:
            by_loop.setdefault(call.loop, []).append((call.future, outcome))  # type: ignore[arg-type]
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_set_all, items)
        except RuntimeError:  # the loop was closed: nobody waits for these calls any more
            pass


def _set_all(items: list[tuple[asyncio.Future, Any]]) -> None:
    for future, outcome in items:
        if future.done():  # cancelled by its caller
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


class BatchedScorer:
    """The streams of a config behind per-sample calls: one :class:`SampleGatherer` per stream, one loader.

    ``await scorer.score(sample, step=...)`` (or ``score_sync``) returns the sample's one-row result: every
    stream's score (NaN where it does not apply), its weight and the weighted total.
    """

    def __init__(
        self,
        specs: Sequence[RewardSpec],
        loader: RewardLoader | None = None,
        *,
        max_wait_s: float = MAX_WAIT_S,
        group_size: int | None = None,
        group_timeout_s: float = GROUP_TIMEOUT_S,
        decode: Any = None,
    ) -> None:
        self.loader = loader or RewardLoader()
        #: the config's ``decode:`` stage: a sample's latent decoded once for every stream, with the samples that
        #: arrived before the first stream read it (rewardzoo.core.decode, ``rolling``)
        self.decoder = decoder_for(decode, self.loader)
        self.gatherers = {
            spec.name: SampleGatherer(
                RewardProcessor([spec], self.loader),
                max_wait_s=max_wait_s,
                group_size=group_size,
                group_timeout_s=group_timeout_s,
            )
            for spec in specs
        }

    def submit(self, sample: Sample, step: int | None = None, member: Hashable | None = None) -> list[cf.Future]:
        sample = self._with_pixels(sample)
        return [g.submit(sample, step, member) for g in self.gatherers.values()]

    def _with_pixels(self, sample: Sample) -> Sample:
        """``sample`` with the decode stage's pixels to come (shared by every stream), when the config has one."""
        if self.decoder is None:
            return sample
        streams = [g.processor for g in self.gatherers.values()]
        specs, rewards = [p.specs[0] for p in streams], {k: v for p in streams for k, v in p.rewards.items()}
        return self.decoder.attach([sample], specs, rewards, rolling=True)[0]

    async def score(self, sample: Sample, step: int | None = None, member: Hashable | None = None) -> RewardResult:
        sample = self._with_pixels(sample)
        futures = [g.submit_async(sample, step, member) for g in self.gatherers.values()]
        return combined_result(await _all(futures))

    def score_sync(
        self, sample: Sample, step: int | None = None, member: Hashable | None = None, timeout: float | None = None
    ) -> RewardResult:
        return combined_result([f.result(timeout) for f in self.submit(sample, step, member)])

    @property
    def calls(self) -> dict[str, int]:
        """Processor calls made so far, per stream."""
        return {name: g.calls for name, g in self.gatherers.items()}


async def _all(futures: list[asyncio.Future[RewardResult]]) -> list[RewardResult]:
    """Every stream's row; the first error (in stream order) once all have finished."""
    if len(futures) == 1:  # one stream: its future (an asyncio.gather per call cost ~15 us, 1 ms for 64 calls)
        return [await futures[0]]
    done = await asyncio.gather(*futures, return_exceptions=True)
    results: list[RewardResult] = []
    for item in done:
        if isinstance(item, BaseException):
            raise item
        results.append(item)
    return results


# ------------------------------------------------------------------------- what the adapters share
def plain_value(value: Any) -> Any:
    """Plain dicts and lists from a trainer's config containers (OmegaConf's DictConfig / ListConfig)."""
    from collections.abc import Mapping as _Mapping
    from collections.abc import Sequence as _Sequence

    if isinstance(value, _Mapping) or (hasattr(value, "items") and hasattr(value, "keys")):
        return {str(k): plain_value(v) for k, v in value.items()}
    if (isinstance(value, _Sequence) and not isinstance(value, (str, bytes))) or type(value).__name__ == "ListConfig":
        return [plain_value(v) for v in value]
    return value


_SCORERS: dict[str, BatchedScorer] = {}
_SCORERS_LOCK = threading.Lock()


def scorer_for(
    rewards: Any,
    split: str = "train",
    *,
    max_wait_ms: float = MAX_WAIT_S * 1000,
    group_size: int | None = None,
    group_timeout_s: float = GROUP_TIMEOUT_S,
) -> BatchedScorer:
    """The process's :class:`BatchedScorer` for a config (built on first use, then reused: a trainer passes the
    same keyword arguments on every call). ``rewards``: a YAML path, a list of entries (as under ``rewards:``)
    or a mapping with a ``rewards:`` key."""
    import json

    from ..core.resolve import resolve_config

    rewards = plain_value(rewards)
    key = json.dumps([rewards, split, max_wait_ms, group_size, group_timeout_s], sort_keys=True, default=str)
    with _SCORERS_LOCK:
        scorer = _SCORERS.get(key)
        if scorer is None:
            if rewards is None:
                raise ConfigError(
                    "name the rewards: reward_kwargs {rewards: PATH.yaml} or a list of entries", field="rewards"
                )
            source = {"rewards": list(rewards)} if isinstance(rewards, (list, tuple)) else rewards
            wait = positive_float(max_wait_ms, "max_wait_ms") / 1000.0
            config = resolve_config(source)
            scorer = _SCORERS[key] = BatchedScorer(
                config.specs(split),
                max_wait_s=wait,
                group_size=group_size,
                group_timeout_s=group_timeout_s,
                decode=config.decode,
            )
        return scorer


def score_dict(result: RewardResult) -> dict[str, float]:
    """``{"score": total, <reward>: score, ...}`` of a one-sample result (a reward that does not apply: NaN; a
    scheduled weight also as ``weight/<reward>``). A sample no reward applies to is an error, never a 0."""
    from .common import require_scored

    require_scored(result)
    out = {"score": float(result.total[0])}
    out.update({name: float(scores[0]) for name, scores in result.rewards.items()})
    if result.step is not None:
        out.update({f"weight/{name}": float(w[0]) for name, w in result.weights.items()})
    return out
