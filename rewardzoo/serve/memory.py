"""The server's budget of decoded media: bytes that requests' decoded images may hold at once, across requests.

A PNG of 4096x4096 black pixels is 50 kB on the wire and 48 MB decoded; without a bound across requests a few
clients multiply the server's memory. Each score request reserves what its PNGs will hold (from their headers,
:func:`~rewardzoo.transport.wire.decoded_bytes`) before any is decoded and gives it back once answered; one that
cannot get its share within ``wait_s`` is refused with 503 and Retry-After, one larger than the whole budget with
413. Waiters are served in arrival order, so a large request is not starved by small ones.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator

from ..transport.wire import WireError


class DecodeBusy(Exception):
    """No share of the budget within the wait; ``retry_after`` seconds is a fair wait."""

    def __init__(self, needed: int, limit: int, retry_after: float = 1.0):
        self.retry_after = retry_after
        super().__init__(
            f"the server's decoded media budget (max_decoded_bytes={limit}) is in use; this request "
            f"needs {needed} bytes; retry in {retry_after:g} s"
        )


class DecodeBudget:
    """``async with budget.hold(n):`` — ``n`` bytes of the ``limit`` (None: unbounded) for the block's duration.
    Used from one event loop."""

    def __init__(self, limit: int | None, wait_s: float = 5.0) -> None:
        self.limit, self.wait_s = limit, wait_s
        self.used = 0
        self.peak = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future]] = collections.deque()

    @contextlib.asynccontextmanager
    async def hold(self, n: int) -> AsyncIterator[None]:
        await self._acquire(n)
        try:
            yield
        finally:
            self._release(n)

    async def _acquire(self, n: int) -> None:
        if self.limit is None or n == 0:
            self._take(n)
            return
        if n > self.limit:
            raise WireError(
                f"the request's images need {n} bytes decoded, over the server's limit "
                f"max_decoded_bytes={self.limit}; send fewer or smaller images per request",
                status=413,
                kind="limit",
                limit="max_decoded_bytes",
            )
        if not self._waiters and self.used + n <= self.limit:
            self._take(n)
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((n, future))
        try:
            await asyncio.wait_for(asyncio.shield(future), self.wait_s)
        except asyncio.TimeoutError:
            if future.done():  # granted just as the wait ended: keep it
                return
            self._waiters.remove((n, future))
            future.cancel()
            self._wake()
            raise DecodeBusy(n, self.limit, max(1.0, self.wait_s)) from None
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release(n)
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove((n, future))
            raise

    def _take(self, n: int) -> None:
        self.used += n
        self.peak = max(self.peak, self.used)

    def _release(self, n: int) -> None:
        self.used -= n
        self._wake()

    def _wake(self) -> None:
        if self.limit is None:  # unbounded: nobody waits
            return
        while self._waiters and self.used + self._waiters[0][0] <= self.limit:
            n, future = self._waiters.popleft()
            if not future.done():
                self._take(n)
                future.set_result(None)
