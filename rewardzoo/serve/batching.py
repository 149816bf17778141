"""Server-side batching: requests from many clients scored together, with a bounded queue.

Requests wait in one queue. A single worker takes the first, then keeps taking queued requests for the
same rewards until the batch holds ``max_batch`` samples or ``max_wait_s`` passed since it started; a
request is never split (its groups stay whole), and one larger than ``max_batch`` is scored on its own.
The batch waits only when more may come: while other requests are on their way (:meth:`Batcher.arrival`: their
bodies being read or decoded), or for the whole ``max_wait_s`` when requests met in the last
:data:`CONTENTION_MEMORY_S` (one arrived while others were queued, arriving or running: concurrent clients, whose
next requests are about to come). A lone client's request runs at once instead of paying ``max_wait_s``.
While a batch runs on the model thread the next requests queue up, so under load the batches grow by
themselves. When the queue already holds ``max_queue`` samples a request is refused at once
(:class:`Overloaded`, answered 503 with Retry-After) instead of growing memory without bound.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..core.batching import Assembler
from .metrics import Metrics


class Overloaded(Exception):
    """The queue is full; ``retry_after`` seconds is a fair wait before asking again."""

    def __init__(self, queued: int, limit: int, retry_after: float):
        self.retry_after = retry_after
        super().__init__(
            f"the server's queue holds {queued} samples (its limit max_queue={limit}); retry in {retry_after:g} s"
        )


_K = TypeVar("_K", bound=Hashable)

#: How long requests that met keep the batcher waiting the whole ``max_wait_s`` for the next ones.
CONTENTION_MEMORY_S = 1.0


@dataclass
class _Job(Generic[_K]):
    key: _K
    samples: Sequence[Any]
    future: asyncio.Future
    queued_at: float = field(default_factory=time.monotonic)


class Batcher(Generic[_K]):
    """``await submit(key, samples)`` -> what ``run(key, [samples, ...])`` gave for that request.

    ``run`` is called on one model thread with the requests of a batch (same ``key``) and returns one
    result per request (an exception instance is raised to that request's caller).
    """

    def __init__(
        self,
        run: Callable[[_K, list[Sequence[Any]]], Sequence[Any]],
        *,
        max_batch: int = 64,
        max_wait_s: float = 0.005,
        max_queue: int = 4096,
        metrics: Metrics | None = None,
    ) -> None:
        self.run, self.max_batch, self.max_wait_s, self.max_queue = run, max_batch, max_wait_s, max_queue
        self.metrics = metrics or Metrics()
        self._queue: collections.deque[_Job[_K]] = collections.deque()
        self._queued = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="rewardzoo-serve-model")
        self._batch_seconds = 0.05  # running mean, for Retry-After
        self._arriving = 0
        self._running = False
        self._contended_at = -math.inf  # when a request last arrived while others were in the batcher

    def arrival(self) -> Arrival:
        """Mark a request on its way to :meth:`submit` (from its headers on): while one is, a batch waits for it
        (at most ``max_wait_s``). Ends when it is submitted, or at the latest on leaving the ``with`` block."""
        return Arrival(self)

    def _arrived(self) -> None:
        self._arriving -= 1
        if self._wake is not None:
            self._wake.set()

    @property
    def queued(self) -> int:
        return self._queued

    async def submit(self, key: _K, samples: Sequence[Any], arrival: Arrival | None = None) -> Any:
        if arrival is not None:
            arrival.end()
        loop, wake = self._start()
        n = len(samples)
        if self._queued + n > self.max_queue and self._queued > 0:
            batches_ahead = max(1.0, self._queued / max(self.max_batch, 1))
            raise Overloaded(
                self._queued, self.max_queue, round(min(30.0, max(1.0, batches_ahead * self._batch_seconds)), 1)
            )
        if self._queue or self._running or self._arriving:
            self._contended_at = time.monotonic()
        job = _Job(key, samples, loop.create_future())
        self._queue.append(job)
        self._queued += n
        self.metrics.queue(self._queued)
        wake.set()
        return await job.future

    def _start(self) -> tuple[asyncio.AbstractEventLoop, asyncio.Event]:
        """The running loop and its wake-up event; the worker task on that loop started at first use."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._loop is not loop or self._wake is None:
            self._loop, self._wake = loop, asyncio.Event()
            self._task = loop.create_task(self._worker(loop, self._wake))
        return loop, self._wake

    async def _take(self, wake: asyncio.Event) -> _Job[_K]:
        while not self._queue:
            wake.clear()
            await wake.wait()
        job = self._queue.popleft()
        self._queued -= len(job.samples)
        return job

    async def _worker(self, loop: asyncio.AbstractEventLoop, wake: asyncio.Event) -> None:
        while True:  # a batch's jobs (and their decoded samples) are locals of one call: not held while idle
            await self._serve_next(loop, wake)

    async def _serve_next(self, loop: asyncio.AbstractEventLoop, wake: asyncio.Event) -> None:
        """Take the next request, gather the ones that batch with it and run them."""
        # the batch assembler's chunks, each request an item of its samples' size (never split)
        first = await self._take(wake)
        assembler: Assembler[_Job[_K]] = Assembler(self.max_batch)
        due = assembler.add(first, size=len(first.samples))
        now = time.monotonic()
        deadline = now + self.max_wait_s
        contended = now - self._contended_at < CONTENTION_MEMORY_S
        while not due:
            if not self._queue:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not (self._arriving or contended):
                    break
                wake.clear()
                try:
                    await asyncio.wait_for(wake.wait(), remaining)
                except asyncio.TimeoutError:
                    break
                continue
            nxt = self._queue[0]
            if nxt.key != first.key or not assembler.fits(len(nxt.samples)):
                break  # it starts the next batch
            due = assembler.add(await self._take(wake), size=len(nxt.samples))
        self.metrics.queue(self._queued)
        for batch in due or assembler.flush():
            await self._run(loop, batch)

    async def _run(self, loop: asyncio.AbstractEventLoop, batch: list[_Job[_K]]) -> None:
        size = sum(len(job.samples) for job in batch)
        started = time.monotonic()
        self._running = True
        try:
            results = await loop.run_in_executor(self._executor, self.run, batch[0].key, [j.samples for j in batch])
        except BaseException as exc:  # the runner itself failed: every request of the batch learns it
            results = [exc] * len(batch)
        finally:
            self._running = False
        elapsed = time.monotonic() - started
        self._batch_seconds = 0.8 * self._batch_seconds + 0.2 * elapsed
        self.metrics.batch(size, len(batch))
        for job, result in zip(batch, results):
            if job.future.done():
                continue  # its client went away
            if isinstance(result, BaseException):
                job.future.set_exception(result)
            else:
                job.future.set_result(result)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)


class Arrival:
    """A request counted as arriving by its :class:`Batcher` until :meth:`end` (idempotent)."""

    def __init__(self, batcher: Batcher) -> None:
        self._batcher: Batcher | None = batcher
        batcher._arriving += 1

    def end(self) -> None:
        if self._batcher is not None:
            self._batcher._arrived()
            self._batcher = None

    def __enter__(self) -> Arrival:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()
