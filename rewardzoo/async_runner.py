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
``finalize`` returns the :class:`~rewardzoo.processor.RewardResult` that ``processor(all_samples)``
would return, raises the first worker error (naming the reward), and raises
:class:`RewardTimeoutError` instead of hanging when ``timeout`` seconds pass. The runner is reusable
after ``finalize``; ``close()`` (or leaving a ``with`` block) stops its threads.

A call that is still running when the timeout fires cannot be killed (Python has no way to stop a
thread): it keeps running on its worker thread and its result is discarded; the runner's next round
uses fresh threads. Worker threads are daemons, so such a call never keeps the process from exiting.

On CUDA, calls of a reward on device ``cuda:N`` run on one side stream per device that first waits
for the work the trainer had queued on that device when the samples were added.
"""

from __future__ import annotations

import concurrent.futures as cf
import queue
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .engine import (ConversionCache, Job, Outcome, RewardResult, ScoreTable, applicable_mask, as_samples,
                     check_required, group_indices, run_call)
from .errors import InputError, RewardTimeoutError, RunnerClosedError
from .rewards.base import Reward
from .sample import Sample
from .shared.device import DeviceStreams as _Streams
from .shared.options import positive_float, positive_int

if TYPE_CHECKING:
    from .config import RewardSpec
    from .processor import RewardProcessor


_WARNED: set[tuple[str, type]] = set()
_WARNED_LOCK = threading.Lock()


def effective_workers(spec: "RewardSpec", reward: Reward) -> int:
    """``num_workers``, or 1 for a reward whose class is not thread-safe (warns once per stream and class)."""
    if reward.thread_safe or spec.num_workers == 1:
        return spec.num_workers
    with _WARNED_LOCK:
        key = (spec.name, type(reward))
        if key not in _WARNED:
            _WARNED.add(key)
            warnings.warn(f"reward '{spec.name}' ({type(reward).__name__}) is not thread-safe: it runs on one "
                          f"thread, not num_workers={spec.num_workers}", RuntimeWarning, stacklevel=3)
    return 1


class DaemonPool:
    """A fixed pool of worker threads that are daemons, with the submit/shutdown of an executor.

    ``concurrent.futures.ThreadPoolExecutor`` joins its workers at interpreter exit, so one reward call
    stuck after a timeout would keep the process alive for ever. These workers never block exit: a call
    still running when the process ends is dropped with it.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], Any]) -> cf.Future:
        future: cf.Future = cf.Future()
        self._queue.put((future, fn))
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # delivered to whoever waits on the future
                future.set_exception(exc)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        """Stop the workers after their current call; ``cancel_futures`` drops the queued calls first."""
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


class AsyncRewardRunner:
    """Incremental scoring of one round of samples (see the module docstring).

    ``timeout``: seconds ``finalize`` may wait for the worker threads (None = no limit).
    ``group_size``: samples per group, when known; complete groups of async groupwise rewards are then
    scored while the round is still being generated (single process only).
    """

    def __init__(self, processor: "RewardProcessor", *, timeout: float | None = None,
                 group_size: int | None = None) -> None:
        if timeout is not None:
            timeout = positive_float(timeout, "timeout")
        positive_int(group_size, "group_size", allow_none=True)
        self.processor = processor
        self.timeout = timeout
        self.group_size = group_size
        self._async = [s for s in processor.specs if s.async_reward]
        self._workers = {s.name: effective_workers(s, processor.rewards[s.name]) for s in self._async}
        self._pools: dict[str, DaemonPool] = {}
        self._streams = _Streams()
        self._cuda_devices = sorted({str(processor.rewards[s.name].device) for s in self._async
                                     if _Streams.is_cuda(processor.rewards[s.name])})
        self._closed = False
        self._reset()

    # ----------------------------------------------------------------------------------------- public
    def add(self, samples: Iterable[Sample | Mapping[str, Any]]) -> range:
        """Append samples to the round; submit every full pointwise chunk and complete group at once.

        Returns the indices these samples have in the round (and in the final result). A malformed
        sample, or one that lacks a field an async reward requires, is reported here with its index in
        the round; with a :class:`~rewardzoo.distributed.DistributedRewardProcessor` across ranks, at
        ``finalize`` instead, so that every rank fails at the same point.
        """
        self._check_open()
        start = len(self._samples)
        try:
            new = as_samples(samples, start=start)  # errors name the index in the round
            self._samples.extend(new)
            if self._deferred is not None:
                return range(start, len(self._samples))
            events = _Streams.ready_events(self._cuda_devices) if self._cuda_devices and new else {}
            for spec in self._async:
                reward = self.processor.rewards[spec.name]
                local = np.flatnonzero(applicable_mask(spec, new)).tolist()
                indices = [start + i for i in local]
                check_required(spec.name, reward, self._samples, indices)
                if reward.kind == "groupwise":
                    self._add_groupwise(spec, reward, indices, events)
                else:
                    waiting = self._waiting[spec.name]
                    waiting.extend(indices)
                    while len(waiting) >= spec.batch_size:
                        chunk, waiting[:] = waiting[:spec.batch_size], waiting[spec.batch_size:]
                        self._submit(spec, reward, chunk, events)
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

    def finalize(self) -> "RewardResult":
        """Flush the pointwise tails, score what is left, wait for the workers; the round's result.

        Equal to ``processor(all added samples)``. Raises the first worker error (in submission order),
        :class:`RewardTimeoutError` after ``timeout`` seconds; the runner then starts a fresh round.
        """
        self._check_open()
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            result = self._finalize(deadline)
        except BaseException:
            self._abort()
            raise
        self._reset()
        return result

    @property
    def num_samples(self) -> int:
        """Samples added to the current round."""
        return len(self._samples)

    @property
    def in_flight(self) -> int:
        """Submitted calls that have not finished yet."""
        return sum(not f.done() for _, f in self._futures)

    def close(self) -> None:
        """Stop the worker threads (waiting for running calls); the runner cannot be used afterwards."""
        self._abort()
        for pool in self._pools.values():
            pool.shutdown(wait=True)
        self._pools.clear()
        self._closed = True

    def __enter__(self) -> "AsyncRewardRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------------- internals
    def _reset(self) -> None:
        self._samples: list[Sample] = []
        self._cache = ConversionCache(self._samples)
        self._waiting: dict[str, list[int]] = {s.name: [] for s in self._async}
        self._open_groups: dict[str, dict[Any, list[int]]] = {s.name: {} for s in self._async}
        self._complete_groups: dict[str, set] = {s.name: set() for s in self._async}
        self._futures: list[tuple[str, cf.Future]] = []
        self._deferred: Exception | None = None
        self._done: list[tuple[str, list[int], cf.Future]] = []

    def _check_open(self) -> None:
        if self._closed:
            raise RunnerClosedError("this AsyncRewardRunner was closed; start another with processor.incremental()")

    def _add_groupwise(self, spec: "RewardSpec", reward: Reward, indices: list[int], events: dict) -> None:
        groups, complete = self._open_groups[spec.name], self._complete_groups[spec.name]
        for key, members in group_indices(spec.name, self._samples, indices).items():
            if key in complete:  # its group_size samples were already scored
                raise InputError(f"group {key[1]!r} has more than group_size={self.group_size} samples",
                                 reward=spec.name, field="group_id", sample=members[0])
            groups.setdefault(key, []).extend(members)
        if self.group_size is None or self.processor.collective:
            return
        for key in [k for k, m in groups.items() if len(m) >= self.group_size]:
            members = groups.pop(key)
            complete.add(key)
            if len(members) > self.group_size:
                raise InputError(f"group {key[1]!r} has more than group_size={self.group_size} samples",
                                 reward=spec.name, field="group_id", sample=members[self.group_size])
            self._submit(spec, reward, members, events)

    def _pool(self, spec: "RewardSpec") -> DaemonPool:
        pool = self._pools.get(spec.name)
        if pool is None:
            pool = self._pools[spec.name] = DaemonPool(self._workers[spec.name], f"rewardzoo-{spec.name}")
        return pool

    def _task(self, name: str, reward: Reward, fn: Callable[[], Outcome], events: dict) -> Callable[[], Outcome]:
        if not _Streams.is_cuda(reward):
            return fn
        device = str(reward.device)
        return lambda: self._streams.call(fn, device, events.get(device))

    def _submit(self, spec: "RewardSpec", reward: Reward, indices: list[int], events: dict) -> cf.Future:
        cache = self._cache
        fn = self._task(spec.name, reward, lambda: run_call(spec.name, reward, indices, cache), events)
        future = self._pool(spec).submit(fn)
        self._futures.append((spec.name, future))
        self._done.append((spec.name, indices, future))
        return future

    def run_jobs(self, spec: "RewardSpec", reward: Reward, jobs: Sequence[Job],
                 deadline: float | None = None) -> list[Outcome]:
        """Run prepared calls of ``spec`` (on its pool when async) and return their outcomes in order."""
        if not spec.async_reward:
            return [job() for job in jobs]
        events = _Streams.ready_events([str(reward.device)]) if _Streams.is_cuda(reward) else {}
        futures = [self._pool(spec).submit(self._task(spec.name, reward, job, events)) for job in jobs]
        self._futures.extend((spec.name, f) for f in futures)
        self._wait([(spec.name, f) for f in futures], deadline)
        return [f.result() for f in futures]

    def _finalize(self, deadline: float | None) -> "RewardResult":
        samples = self._samples
        events = _Streams.ready_events(self._cuda_devices) if self._cuda_devices and samples else {}
        for spec in self._async:  # tails, and (single process) the remaining groups
            reward = self.processor.rewards[spec.name]
            if reward.kind == "groupwise":
                if not self.processor.collective:
                    for members in self._open_groups[spec.name].values():
                        self._submit(spec, reward, members, events)
                    self._open_groups[spec.name].clear()
            elif self._waiting[spec.name]:
                self._submit(spec, reward, list(self._waiting[spec.name]), events)
                self._waiting[spec.name].clear()
        table = ScoreTable(self.processor.specs, samples, self.processor.advantage)
        # what this runner submitted itself: async pointwise streams, and (single process) async groupwise
        # ones; across ranks the groupwise streams go through the processor's exchange, on this runner's pools
        own = {s.name for s in self._async
               if self.processor.rewards[s.name].kind != "groupwise" or not self.processor.collective}
        self.processor.score_into(table, self._cache, skip=own, error=self._deferred,
                                  run_jobs=lambda spec, reward, jobs: self.run_jobs(spec, reward, jobs, deadline),
                                  finish=lambda: self._wait(self._futures, deadline))
        self._wait(self._futures, deadline)
        for name, indices, future in self._done:
            table.put(name, indices, *future.result())
        return table.result()

    def _wait(self, futures: list[tuple[str, cf.Future]], deadline: float | None) -> None:
        """Wait for ``futures``; raise the first error in submission order, or a timeout naming the rewards."""
        pending = {f for _, f in futures}
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # short waits keep the main thread responsive to KeyboardInterrupt
            done, pending = cf.wait(pending, timeout=0.1 if left is None else min(0.1, left),
                                    return_when=cf.FIRST_EXCEPTION)
            if any(f.exception() is not None for f in done if not f.cancelled()):
                break
            if pending and left is not None and left <= 0:
                names = sorted({n for n, f in futures if f in pending})
                raise RewardTimeoutError(f"{len(pending)} call(s) still running after the runner's timeout of "
                                         f"{self.timeout} s", reward=", ".join(names))
        for _, future in futures:
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise future.exception()

    def _abort(self) -> None:
        """Cancel queued calls and drop the round; pools whose threads may still be busy are replaced."""
        for name, future in self._futures:
            future.cancel()
        busy = {name for name, f in self._futures if not f.done()}
        for name in busy:
            pool = self._pools.pop(name, None)
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._reset()

