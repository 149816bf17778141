"""The server's batcher waits for requests on their way (``Batcher.arrival``), and only for them.

Each test bounds its own wait far below ``max_wait_s`` (60 s), so a batch that waited for nothing fails it.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("starlette")

from rewardzoo.serve import batching
from rewardzoo.serve.batching import Batcher

LONG_WAIT_S = 60.0
BOUND_S = 10.0


def batcher(**kwargs) -> tuple[Batcher, list[list[list[int]]]]:
    calls: list[list[list[int]]] = []

    def run(key, requests):
        calls.append([list(r) for r in requests])
        return [sum(r) for r in requests]

    return Batcher(run, **{"max_wait_s": LONG_WAIT_S, **kwargs}), calls


def test_a_lone_request_runs_at_once():
    async def main():
        b, calls = batcher()
        try:
            assert await asyncio.wait_for(b.submit("k", [1, 2]), BOUND_S) == 3
        finally:
            b.close()
        return calls

    assert asyncio.run(main()) == [[[1, 2]]]


@pytest.fixture
def arrivals_only(monkeypatch):
    """Requests that met do not make the batcher wait (:data:`CONTENTION_MEMORY_S` 0): arrivals alone."""
    monkeypatch.setattr(batching, "CONTENTION_MEMORY_S", 0.0)


def test_a_batch_waits_for_a_request_on_its_way_and_takes_it(arrivals_only):
    async def main():
        b, calls = batcher()
        try:
            with b.arrival() as coming:
                first = asyncio.ensure_future(b.submit("k", [1]))
                for _ in range(20):  # the worker has taken the first request and is waiting
                    await asyncio.sleep(0.01)
                assert not calls and not first.done()
                second = await asyncio.wait_for(b.submit("k", [2, 3], coming), BOUND_S)
            return calls, await first, second
        finally:
            b.close()

    calls, first, second = asyncio.run(main())
    assert calls == [[[1], [2, 3]]] and (first, second) == (1, 5)


def test_an_arrival_that_never_submits_releases_the_batch(arrivals_only):
    async def main():
        b, calls = batcher()
        try:
            coming = b.arrival()
            first = asyncio.ensure_future(b.submit("k", [4]))
            await asyncio.sleep(0.05)
            assert not first.done()
            coming.end()  # its body broke off: nothing more is on its way
            coming.end()  # (ending twice counts once)
            return await asyncio.wait_for(first, BOUND_S), calls, b._arriving
        finally:
            b.close()

    assert asyncio.run(main()) == (4, [[[4]]], 0)


def test_max_wait_still_bounds_the_wait_for_a_slow_arrival(arrivals_only):
    async def main():
        b, calls = batcher(max_wait_s=0.05)
        try:
            with b.arrival():
                return await asyncio.wait_for(b.submit("k", [7]), BOUND_S), calls
        finally:
            b.close()

    assert asyncio.run(main()) == (7, [[[7]]])


def test_after_requests_met_a_batch_waits_for_the_next_ones():
    """Two requests at once (concurrent clients): the next lone request waits up to max_wait_s, and one submitted
    meanwhile (no arrival marked) joins its batch; without the contention it would have run alone."""

    async def main():
        b, calls = batcher(max_wait_s=0.5)
        try:
            await asyncio.wait_for(asyncio.gather(b.submit("k", [1]), b.submit("k", [2])), BOUND_S)
            lone = asyncio.ensure_future(b.submit("k", [3]))
            await asyncio.sleep(0.05)
            late = await asyncio.wait_for(b.submit("k", [4]), BOUND_S)
            return calls, await lone, late
        finally:
            b.close()

    calls, lone, late = asyncio.run(main())
    assert calls == [[[1], [2]], [[3], [4]]] and (lone, late) == (3, 4)
