"""One batch assembler: how a reward stream's items become calls, whichever front end feeds it.

Items arrive over time — sample indices (the processor, the incremental runner), per-sample calls (the
gatherer behind verl's per-sample reward function), whole requests (the server's batcher). An
:class:`Assembler` of one stream turns them into calls, in the order they become due:

- **pointwise**: chunks of at most ``limit`` in arrival order. An item may count for more than one
  (``size``: a request's samples); it is never split: a chunk closes before an item that would overflow
  it, and an item at or over the limit is a call of its own. :meth:`Assembler.flush` emits the tail.
- **groupwise**: one call per group (items keyed by :func:`~rewardzoo.shared.groups.group_key`), due as
  soon as it holds ``group_size`` items when that is known; :meth:`Assembler.flush` emits the open groups
  in order of first appearance. ``strict``: an item for a group that was already emitted complete raises
  :class:`GroupOverflow`.

:func:`split_on_failure` runs a call and, when it fails, runs its items again one by one (a group as a
whole, never split), so an error reaches only the items it belongs to and the others get their results.

Executors run the calls: :func:`run_inline` on the caller's thread (the processor), a :class:`ThreadExecutor`
of worker threads per stream (the incremental runner; its :class:`DaemonPool` also runs TRL's concurrent
reward functions), and the cross-rank exchange
(:class:`~rewardzoo.core.distributed.GroupExchange`), which gathers the groups split over ranks before
they are called.
"""

from __future__ import annotations

import concurrent.futures as cf
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..errors import RewardTimeoutError
from ..shared.device import DeviceStreams

if TYPE_CHECKING:
    from ..rewards.base import Reward
    from ..spec.config import RewardSpec

_T = TypeVar("_T")
_R = TypeVar("_R")


class GroupOverflow(Exception):
    """An item for a group that a strict :class:`Assembler` already emitted complete (``key``, ``item``)."""

    def __init__(self, key: Hashable, item: Any) -> None:
        self.key, self.item = key, item
        super().__init__(f"group {key!r} is already complete")


class Assembler(Generic[_T]):
    """Items of one reward stream gathered into calls (see the module docstring).

    ``limit``: items (sum of their sizes) per pointwise call, None for no limit; ``groupwise``: items are
    keyed by group; ``group_size``: items per complete group (None: a group is due only at :meth:`flush`).
    """

    def __init__(
        self, limit: int | None = None, *, groupwise: bool = False, group_size: int | None = None, strict: bool = False
    ) -> None:
        self.limit, self.groupwise, self.group_size, self.strict = limit, groupwise, group_size, strict
        self._pending: list[_T] = []
        self._size = 0
        self._groups: dict[Hashable, list[_T]] = {}
        self._completed: set[Hashable] = set()

    def add(self, item: _T, *, key: Hashable = None, size: int = 1) -> list[list[_T]]:
        """Take one item (``key``: its group, for a groupwise stream); the calls now due."""
        if self.groupwise:
            if self.strict and key in self._completed:
                raise GroupOverflow(key, item)
            members = self._groups.setdefault(key, [])
            members.append(item)
            if self.group_size is not None and len(members) >= self.group_size:
                del self._groups[key]
                if self.strict:
                    self._completed.add(key)
                return [members]
            return []
        due = []
        if not self.fits(size):
            due.append(self._take())
        self._pending.append(item)
        self._size += size
        if self.limit is not None and self._size >= self.limit:
            due.append(self._take())
        return due

    def fits(self, size: int = 1) -> bool:
        """Whether a pointwise item of ``size`` joins the chunk being gathered (rather than close it first)."""
        return not self._pending or self.limit is None or self._size + size <= self.limit

    def extend(self, items: Iterable[_T], keys: Iterable[Hashable] | None = None) -> list[list[_T]]:
        """:meth:`add` each of ``items`` (with ``keys``, for a groupwise stream); the calls now due."""
        due: list[list[_T]] = []
        for item, key in zip(items, keys) if keys is not None else ((item, None) for item in items):
            due.extend(self.add(item, key=key))
        return due

    def flush(self) -> list[list[_T]]:
        """The calls of what waits: the pointwise tail, or the open groups in order of first appearance."""
        if self.groupwise:
            groups, self._groups = list(self._groups.values()), {}
            return groups
        return [self._take()] if self._pending else []

    def plan(self, items: Iterable[_T], keys: Iterable[Hashable] | None = None) -> list[list[_T]]:
        """Every call of ``items`` at once: :meth:`extend`, then :meth:`flush`."""
        return self.extend(items, keys) + self.flush()

    @property
    def pending(self) -> list[_T]:
        """The pointwise items waiting for their chunk, in arrival order."""
        return self._pending

    @property
    def open_groups(self) -> dict[Hashable, list[_T]]:
        """The groups still waiting for members (key -> items), in order of first appearance."""
        return self._groups

    def pop(self, key: Hashable) -> list[_T]:
        """Take an open group out (e.g. one that waited too long); its items."""
        return self._groups.pop(key)

    def __len__(self) -> int:
        """Items waiting."""
        return len(self._pending) + sum(len(m) for m in self._groups.values())

    def _take(self) -> list[_T]:
        chunk, self._pending, self._size = self._pending, [], 0
        return chunk


def chunks(items: Sequence[_T], size: int) -> list[list[_T]]:
    """``items`` in chunks of at most ``size``, in order (a pointwise stream's calls over a whole batch)."""
    return Assembler[_T](size).plan(items)


def split_on_failure(
    run: Callable[[list[_T]], Sequence[_R]], items: list[_T], *, split: bool = True
) -> list[_R | Exception]:
    """``run(items)`` (one result per item); when it raises, with ``split`` and more than one item, each item is
    run again on its own (recursively the same way), so the error reaches only the items it belongs to.
    Without ``split`` (a group, scored as a whole) every item gets the error. One result or error per item."""
    try:
        return list(run(items))
    except Exception as exc:
        if split and len(items) > 1:
            return [split_on_failure(run, [item], split=split)[0] for item in items]
        return [exc] * len(items)


# ------------------------------------------------------------------------------------------ executors
def run_inline(spec: RewardSpec, reward: Reward, jobs: Sequence[Callable[[], _R]]) -> list[_R]:
    """The inline executor: a stream's calls one after another on this thread (the synchronous processor)."""
    return [job() for job in jobs]


class DaemonPool:
    """The thread executor: a fixed pool of worker threads that are daemons, with an executor's submit/shutdown.

    ``concurrent.futures.ThreadPoolExecutor`` joins its workers at interpreter exit, so one reward call
    stuck after a timeout would keep the process alive for ever. These workers never block exit: a call
    still running when the process ends is dropped with it.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[cf.Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], _R]) -> cf.Future[_R]:
        future: cf.Future[_R] = cf.Future()
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


class ThreadExecutor:
    """The thread executor: each stream's calls on a :class:`DaemonPool` of its own (``workers[name]`` threads,
    started at its first call), a CUDA reward's on its device's side stream after the events recorded when the
    call was queued. It keeps the futures of the round (until :meth:`new_round` or :meth:`abort`) and waits for
    them with a deadline; past it, a :class:`~rewardzoo.errors.RewardTimeoutError` naming the streams."""

    def __init__(self, workers: Mapping[str, int], timeout: float | None = None) -> None:
        self.workers, self.timeout = dict(workers), timeout
        self.futures: list[tuple[str, cf.Future[Any]]] = []
        self._pools: dict[str, DaemonPool] = {}
        self._streams = DeviceStreams()

    def submit(self, name: str, reward: Reward, fn: Callable[[], _R], events: Mapping[str, Any]) -> cf.Future[_R]:
        """Queue ``fn`` (a call of stream ``name``) on the stream's pool; its future, kept for the round."""
        if DeviceStreams.is_cuda(reward):
            device, call = str(reward.device), fn
            fn = partial(self._streams.call, call, device, events.get(device))
        pool = self._pools.get(name)
        if pool is None:
            pool = self._pools[name] = DaemonPool(self.workers[name], f"rewardzoo-{name}")
        future = pool.submit(fn)
        self.futures.append((name, future))
        return future

    def run(self, name: str, reward: Reward, jobs: Sequence[Callable[[], _R]], deadline: float | None) -> list[_R]:
        """Run ``jobs`` of stream ``name`` on its pool; their outcomes in order (see :meth:`wait`)."""
        events = DeviceStreams.ready_events([str(reward.device)]) if DeviceStreams.is_cuda(reward) else {}
        futures = [(name, self.submit(name, reward, job, events)) for job in jobs]
        self.wait(futures, deadline)
        return [f.result() for _, f in futures]

    @property
    def in_flight(self) -> int:
        """Calls of the round that have not finished yet."""
        return sum(not f.done() for _, f in self.futures)

    def wait(self, futures: Sequence[tuple[str, cf.Future[Any]]] | None, deadline: float | None) -> None:
        """Wait for ``futures`` (None: the round's); raise the first error in submission order, or a timeout
        past ``deadline`` naming the streams still running."""
        futures = self.futures if futures is None else futures
        pending = {f for _, f in futures}
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # short waits keep the main thread responsive to KeyboardInterrupt
            done, pending = cf.wait(
                pending, timeout=0.1 if left is None else min(0.1, left), return_when=cf.FIRST_EXCEPTION
            )
            if any(f.exception() is not None for f in done if not f.cancelled()):
                break
            if pending and left is not None and left <= 0:
                raise self.timeout_error([(n, f) for n, f in futures if f in pending])
        for _, future in futures:
            if future.done() and not future.cancelled() and (error := future.exception()) is not None:
                raise error

    def wait_any(self, futures: Sequence[tuple[str, cf.Future[Any]]], deadline: float | None) -> None:
        """Wait (at most 0.1 s, for KeyboardInterrupt) for one of ``futures``; a timeout past ``deadline``."""
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise self.timeout_error(futures)
        cf.wait(
            [f for _, f in futures], timeout=0.1 if left is None else min(0.1, left), return_when=cf.FIRST_COMPLETED
        )

    def timeout_error(self, pending: Sequence[tuple[str, cf.Future[Any]]]) -> RewardTimeoutError:
        names = sorted({n for n, _ in pending})
        return RewardTimeoutError(
            f"{len(pending)} call(s) still running after the runner's timeout of {self.timeout} s",
            reward=", ".join(names),
        )

    def new_round(self) -> None:
        """Forget the futures of the round (they have finished)."""
        self.futures = []

    def abort(self) -> None:
        """Cancel the round's queued calls and forget them; pools whose threads may still be busy are replaced."""
        for _name, future in self.futures:
            future.cancel()
        busy = {name for name, f in self.futures if not f.done()}
        for name in busy:
            pool = self._pools.pop(name, None)
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self.futures = []

    def close(self) -> None:
        """Stop every pool's threads (waiting for running calls)."""
        for pool in self._pools.values():
            pool.shutdown(wait=True)
        self._pools.clear()
