"""Incremental, asynchronous scoring for trainers that generate samples in rounds.

``runner = processor.incremental()`` (or ``AsyncRewardRunner(processor)``); then ``runner.add(batch)``
after each generation step and ``result = runner.finalize()`` at the end of the round. For every spec
with ``async_reward: true``:

- pointwise: as soon as ``batch_size`` applicable samples are waiting, that chunk goes to the spec's
  thread pool (``num_workers`` threads); ``finalize`` submits the tails. The chunks are exactly those
  of the synchronous call over all the round's samples, so the scores are identical.
- groupwise: a group goes to the pool as soon as it holds ``group_size`` samples (when the runner was
  given a ``group_size``), otherwise at ``finalize``; across ranks, at ``finalize`` (see
  ``distributed.py``).

Synchronous specs are scored on the caller's thread during ``finalize``, while the pools finish.
``finalize`` returns the :class:`~rewardzoo.core.processor.RewardResult` that ``processor(all_samples)``
would return, raises the first worker error (naming the reward), and raises
:class:`RewardTimeoutError` instead of hanging when ``timeout`` seconds pass. The runner is reusable
after ``finalize``; ``close()`` (or leaving a ``with`` block) stops its threads.

Results as they are ready: ``for i, row in runner.ready()`` (completion order) or
``runner.results(ordered=True)`` (input order, each sample once it and all before it are complete)
yield ``(index, row)``, ``row`` being the one-sample ``RewardResult`` of sample ``index``, as soon as
every stream that applies to it has scored it (a groupwise stream: its whole group). The first call
seals the round: tails and open groups are submitted, so ``add`` raises :class:`RunnerStateError`
until ``finalize``, which then returns the full result (the numbers the rows had) and starts the next
round. Synchronous streams are scored on the caller's thread between two rows. A failed call raises
its error when the iteration reaches one of its samples (the samples before it still come); the
timeout counts from the ``ready``/``results`` call; an error or a timeout ends the round as in
``finalize``. Several iterators of one round each yield every sample (from one thread); one resumed
after ``finalize`` raises :class:`RunnerStateError`. Across ranks the rows come after the cross-rank
exchange, all at once, since every rank must reach it.

A call that is still running when the timeout fires cannot be killed (Python has no way to stop a
thread): it keeps running on its worker thread and its result is discarded; the runner's next round
uses fresh threads. Worker threads are daemons, so such a call never keeps the process from exiting.

On CUDA, calls of a reward on device ``cuda:N`` run on one side stream per device that first waits
for the work the trainer had queued on that device when the samples were added.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError, RewardTimeoutError, RunnerClosedError, RunnerStateError
from ..rewards.base import Reward
from ..shared.device import DeviceStreams as _Streams
from ..shared.options import positive_float, positive_int
from ..spec.sample import Sample
from .batching import Assembler, DaemonPool, GroupOverflow, ThreadExecutor
from .deadlines import guard
from .engine import (
    ConversionCache,
    Job,
    Outcome,
    RewardResult,
    ScoreTable,
    Scoring,
    ScoringFront,
    applicable_mask,
    as_samples,
    assemble,
    call_plan,
    check_required,
    group_indices,
    run_call,
    stream_assembler,
)

if TYPE_CHECKING:
    from ..spec.config import RewardSpec

__all__ = ["AsyncRewardRunner", "DaemonPool", "RewardTimeoutError", "effective_workers"]

_WARNED: set[tuple[str, type]] = set()
_WARNED_LOCK = threading.Lock()


def effective_workers(spec: RewardSpec, reward: Reward) -> int:
    """``num_workers``, or 1 for a reward whose class is not thread-safe (warns once per stream and class)."""
    if reward.thread_safe or spec.num_workers == 1:
        return spec.num_workers
    with _WARNED_LOCK:
        key = (spec.name, type(reward))
        if key not in _WARNED:
            _WARNED.add(key)
            warnings.warn(
                f"reward '{spec.name}' ({type(reward).__name__}) is not thread-safe: it runs on one "
                f"thread, not num_workers={spec.num_workers}",
                RuntimeWarning,
                stacklevel=3,
            )
    return 1


class AsyncRewardRunner:
    """Incremental scoring of one round of samples (see the module docstring): ``add``, then ``finalize``,
    or first read the rows as they are ready with ``ready()`` / ``results(ordered=True)``.

    ``timeout``: seconds ``finalize`` (or an iteration of ``ready``/``results``) may wait for the worker
    threads (None = no limit).
    ``group_size``: samples per group, when known; complete groups of async groupwise rewards are then
    scored while the round is still being generated (single process only).
    """

    _deferred: Exception | None  # declared here because add() assigns it before _reset() appears

    def __init__(self, processor: ScoringFront, *, timeout: float | None = None, group_size: int | None = None) -> None:
        if timeout is not None:
            timeout = positive_float(timeout, "timeout")
        positive_int(group_size, "group_size", allow_none=True)
        self.processor = processor
        self.timeout = timeout
        self.group_size = group_size
        self._async = [s for s in processor.specs if s.async_reward]
        self._executor = ThreadExecutor(
            {s.name: effective_workers(s, processor.rewards[s.name]) for s in self._async}, timeout
        )
        self._cuda_devices = sorted(
            {str(processor.rewards[s.name].device) for s in self._async if _Streams.is_cuda(processor.rewards[s.name])}
        )
        self._closed = False
        self._reset()

    # ----------------------------------------------------------------------------------------- public
    def add(self, samples: Iterable[Sample | Mapping[str, Any]]) -> range:
        """Append samples to the round; submit every full pointwise chunk and complete group at once.

        Returns the indices these samples have in the round (and in the final result). A malformed
        sample, or one that lacks a field an async reward requires, is reported here with its index in
        the round; with a :class:`~rewardzoo.core.distributed.DistributedRewardProcessor` across ranks, at
        ``finalize`` instead, so that every rank fails at the same point.
        """
        self._check_open()
        if self._table is not None:
            raise RunnerStateError(
                "add() after ready()/results() began reading this round's results: call "
                "finalize() first; the next round starts after it"
            )
        start = len(self._samples)
        if not self._samples:
            self.processor.wake()  # a round starts: wake before dispatching to the workers
        try:
            new = self.processor.with_pixels(as_samples(samples, start=start), start)  # errors: the index in the round
            self._samples.extend(new)
            if self._deferred is not None:
                return range(start, len(self._samples))
            events = _Streams.ready_events(self._cuda_devices) if self._cuda_devices and new else {}
            for spec in self._async:
                reward = self.processor.rewards[spec.name]
                local = np.flatnonzero(applicable_mask(spec, new)).tolist()
                indices = [start + i for i in local]
                check_required(spec.name, reward, self._samples, indices)
                for call in self._assemble(spec, reward, indices):
                    self._submit(spec, reward, call, events)
        except Exception as exc:
            if not self.processor.collective:
                self._abort()
                raise
            # across ranks, every rank must reach finalize's exchange: keep the error until then
            self._deferred = self._deferred or exc
        except BaseException:
            self._abort()
            raise
        return range(start, len(self._samples))

    def finalize(self, *, step: int | None = None) -> RewardResult:
        """Flush the pointwise tails, score what is left, wait for the workers; the round's result.
        ``step``: the trainer's step, at which scheduled weights are read (as ``processor(samples, step=...)``).

        Equal to ``processor(all added samples)`` (after ``ready``/``results``, the rows they yielded
        were its rows). Raises the first worker error, :class:`RewardTimeoutError` after ``timeout``
        seconds; the runner then starts a fresh round.
        """
        self._check_open()
        deadline = self._deadline()
        try:
            self._seal(deadline, step)
            while not self._errors and not self._complete():
                self._advance(deadline)
            if self._errors:
                raise self._errors[0]
            assert self._table is not None  # _seal set it
            result = self._table.result()
        except BaseException:
            self._abort()
            self.processor.phase_done()
            raise
        self._reset()
        self.processor.phase_done()  # the round is the reward phase: entries with `offload` sleep again
        return result

    def results(self, *, ordered: bool = True, step: int | None = None) -> Iterator[tuple[int, RewardResult]]:
        """``(index, row)`` for each sample of the round once every stream that applies to it scored it.

        ``row`` is the one-sample :class:`~rewardzoo.core.processor.RewardResult` of sample ``index``: the
        numbers of ``finalize()``'s row ``index`` (its extras: the keys the calls so far reported).
        ``ordered=True``: in input order, each as soon as it and all samples before it are complete;
        ``ordered=False``: in the order the samples complete (:meth:`ready`). Seals the round (see the
        module docstring); a failed call raises its error when the iteration reaches its samples.
        """
        self._check_open()
        deadline = self._deadline()
        try:
            self._seal(deadline, step)
        except BaseException:
            self._abort()
            raise
        return self._iterate(ordered, deadline, self._round)

    def ready(self, *, step: int | None = None) -> Iterator[tuple[int, RewardResult]]:
        """``results(ordered=False)``: each sample's ``(index, row)`` as soon as it is complete."""
        return self.results(ordered=False, step=step)

    @property
    def num_samples(self) -> int:
        """Samples added to the current round."""
        return len(self._samples)

    @property
    def in_flight(self) -> int:
        """Submitted calls that have not finished yet."""
        return self._executor.in_flight

    def close(self) -> None:
        """Stop the worker threads (waiting for running calls); the runner cannot be used afterwards."""
        self._abort()
        self._executor.close()
        self._closed = True

    def __enter__(self) -> AsyncRewardRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------------- internals
    def _reset(self) -> None:
        self._samples: list[Sample] = []
        self._cache = ConversionCache(self._samples)
        self._assemblers: dict[str, Assembler[int]] = {
            s.name: stream_assembler(s, self.processor.rewards[s.name], self.group_size) for s in self._async
        }
        self._executor.new_round()
        self._deferred: Exception | None = None
        self._done: list[tuple[str, list[int], cf.Future[Outcome]]] = []  # calls whose outcome is not in the table yet
        # set when the round is sealed (by ready/results/finalize):
        self._table: ScoreTable | None = None
        self._inline: deque[tuple[str, list[int], Job]] = deque()  # synchronous calls still to run
        self._need = np.zeros(0, dtype=np.int64)  # per sample: applicable streams that have not scored it
        self._order: list[int] = []  # complete samples, in completion order
        self._failed: dict[int, BaseException] = {}  # sample -> the error of a call of it
        self._errors: list[BaseException] = []
        self._round = object()  # identifies the round for its iterators

    def _check_open(self) -> None:
        if self._closed:
            raise RunnerClosedError("this AsyncRewardRunner was closed; start another with processor.incremental()")

    def _assemble(self, spec: RewardSpec, reward: Reward, indices: list[int]) -> list[list[int]]:
        """The calls of ``spec`` that the samples ``indices``, just added, complete (by its assembler)."""
        assembler = self._assemblers[spec.name]
        if reward.kind != "groupwise":
            return assembler.extend(indices)
        groups = group_indices(spec.name, self._samples, indices)  # a missing group_id: an InputError naming it
        if self.processor.collective:
            return []  # across ranks the groups are scored through the exchange, at finalize
        due: list[list[int]] = []
        for key, members in groups.items():
            try:
                due.extend(assembler.extend(members, [key] * len(members)))
            except GroupOverflow as exc:
                raise InputError(
                    f"group {key[1]!r} has more than group_size={self.group_size} samples",
                    reward=spec.name,
                    field="group_id",
                    sample=exc.item,
                ) from None
        return due

    def _submit(
        self, spec: RewardSpec, reward: Reward, indices: list[int], events: dict[str, Any]
    ) -> cf.Future[Outcome]:
        cache = self._cache
        job = guard(spec, reward, indices, partial(run_call, spec.name, reward, indices, cache))  # its timeout_s
        future = self._executor.submit(spec.name, reward, job, events)
        self._done.append((spec.name, indices, future))
        return future

    def run_jobs(
        self, spec: RewardSpec, reward: Reward, jobs: Sequence[Job], deadline: float | None = None
    ) -> list[Outcome]:
        """Run prepared calls of ``spec`` (on its pool when async) and return their outcomes in order."""
        if not spec.async_reward:
            return [job() for job in jobs]
        return self._executor.run(spec.name, reward, jobs, deadline)

    def _deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    def _flush(self) -> None:
        """Submit the pointwise tails and (single process) the remaining groups."""
        events = _Streams.ready_events(self._cuda_devices) if self._cuda_devices and self._samples else {}
        for spec in self._async:
            reward = self.processor.rewards[spec.name]
            if reward.kind == "groupwise" and self.processor.collective:
                continue  # the exchange scores them
            for call in self._assemblers[spec.name].flush():
                self._submit(spec, reward, call, events)

    def _seal(self, deadline: float | None, step: int | None = None) -> None:
        """End the round's additions: flush, gate every spec, queue the synchronous calls (once per round);
        ``step`` (the first one given in a round) is the one its scheduled weights are read at."""
        if self._table is not None:
            return
        samples, specs = self._samples, self.processor.specs
        self._flush()
        table = ScoreTable(specs, samples, self.processor.advantage, step)
        if self.processor.collective:  # every rank takes part in the exchange: the whole round is scored here
            self._score_collective(table, deadline)
        else:
            self.processor.score_into(table, self._cache, Scoring(skip=[s.name for s in specs]))  # gates only
            for spec in specs:
                if not spec.async_reward:
                    reward = self.processor.rewards[spec.name]
                    for chunk in call_plan(spec, reward, samples, np.flatnonzero(table.masks[spec.name]).tolist()):
                        job = partial(run_call, spec.name, reward, chunk, self._cache)
                        self._inline.append((spec.name, chunk, guard(spec, reward, chunk, job)))
        need = np.zeros(len(samples), dtype=np.int64)
        if not self.processor.collective:
            for mask in table.masks.values():
                need += mask
        self._table, self._need = table, need
        self._order = np.flatnonzero(need == 0).tolist()

    def _score_collective(self, table: ScoreTable, deadline: float | None) -> None:
        # what this runner submitted itself: async pointwise streams; the groupwise streams go through
        # the processor's exchange, on this runner's pools
        own = {s.name for s in self._async if self.processor.rewards[s.name].kind != "groupwise"}
        run = Scoring(
            skip=own,
            run_jobs=lambda spec, reward, jobs: self.run_jobs(spec, reward, jobs, deadline),
            error=self._deferred,
            finish=lambda: self._executor.wait(None, deadline),
        )
        self.processor.score_into(table, self._cache, run)
        self._executor.wait(None, deadline)
        for name, indices, future in self._done:
            table.put(name, indices, *future.result())
        self._done = []

    def _complete(self) -> bool:
        return not self._inline and not self._done

    def _advance(self, deadline: float | None) -> None:
        """Take in the finished calls; if none has finished, run one synchronous call or wait a little."""
        if not any(f.done() for _, _, f in self._done):
            if not self._inline:
                self._executor.wait_any([(n, f) for n, _, f in self._done], deadline)
                return
            name, chunk, job = self._inline.popleft()
            future: cf.Future[Outcome] = cf.Future()
            try:
                future.set_result(job())
            except Exception as exc:  # raised when the iteration reaches the chunk's samples
                future.set_exception(exc)
            self._done.append((name, chunk, future))
        waiting = []
        for name, chunk, future in self._done:  # in submission order
            if not future.done():
                waiting.append((name, chunk, future))
            elif (error := future.exception()) is not None:
                self._errors.append(error)
                for i in chunk:
                    self._failed.setdefault(i, error)
            else:
                assert self._table is not None  # calls are taken in only after _seal
                self._table.put(name, chunk, *future.result())
                self._need[chunk] -= 1
                self._order.extend(i for i in chunk if self._need[i] == 0 and i not in self._failed)
        self._done = waiting

    def _iterate(self, ordered: bool, deadline: float | None, round_id: object) -> Iterator[tuple[int, RewardResult]]:
        position = 0  # ordered: the next sample index; otherwise: the next entry of self._order
        while True:
            if self._round is not round_id:
                raise RunnerStateError(
                    "this round's results were already finalized (or it failed); iterate over "
                    "ready()/results() of the current round"
                )
            try:
                if ordered:
                    if position == len(self._need):
                        return
                    if position in self._failed:
                        raise self._failed[position]
                    if self._need[position]:
                        self._advance(deadline)
                        continue
                elif position == len(self._order):
                    if self._errors:
                        raise self._errors[0]
                    if self._complete():
                        return
                    self._advance(deadline)
                    continue
                index = position if ordered else self._order[position]
                row = self._row(index)
            except BaseException:
                self._abort()
                raise
            position += 1
            yield index, row

    def _row(self, i: int) -> RewardResult:
        """Row ``i`` of the table as a one-sample result (the arithmetic of ``finalize``'s, element by element)."""
        t, one = self._table, slice(i, i + 1)
        assert t is not None  # rows are read only after _seal
        return assemble(
            t.specs,
            t.samples[one],
            {k: v[one] for k, v in t.scores.items()},
            {k: v[one] for k, v in t.masks.items()},
            {k: {kk: vv[one].copy() for kk, vv in v.items()} for k, v in t.extras.items()},
            t.advantage_mode,
            t.step,
        )

    def _abort(self) -> None:
        """Cancel queued calls and drop the round; pools whose threads may still be busy are replaced."""
        self._executor.abort()
        self._reset()
