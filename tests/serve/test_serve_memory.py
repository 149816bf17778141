"""Memory amplification through compressed media (issue 37, item 2): black PNGs are tiny on the wire and large
decoded. The server's decoded-media budget bounds what concurrent requests hold at once; measured as the peak
RSS of a real server process on 127.0.0.1 under the attack, against the same attack with the budget lifted."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

msgpack = pytest.importorskip("msgpack")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from rewardzoo.serve.memory import DecodeBudget, DecodeBusy
from rewardzoo.transport import wire

from .helpers import Server, request

SIDE, PER_REQUEST, CONCURRENT = 1024, 16, 8
MIB = 2**20


def attack_body() -> bytes:
    black = wire.png_bytes(np.zeros((SIDE, SIDE, 3), np.uint8), level=9)
    return msgpack.packb(
        {"protocol": 1, "samples": [{"image": {"format": "png", "data": black}}] * PER_REQUEST}, use_bin_type=True
    )


def status_kb(pid: int, key: str) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def peak_growth_mib(server: Server, body: bytes) -> tuple[float, list[int]]:
    """(peak RSS growth of the server during CONCURRENT attack requests, their statuses)."""
    small = msgpack.packb(
        {
            "protocol": 1,
            "samples": [{"image": {"format": "png", "data": wire.png_bytes(np.zeros((8, 8, 3), np.uint8))}}],
        },
        use_bin_type=True,
    )
    assert request(server.url, "POST", "/v1/score", small, {"Content-Type": "application/msgpack"})[0] == 200
    before = status_kb(server.proc.pid, "VmHWM")
    statuses: list[int] = []

    def one():
        statuses.append(
            request(server.url, "POST", "/v1/score", body, {"Content-Type": "application/msgpack"}, timeout=120)[0]
        )

    threads = [threading.Thread(target=one) for _ in range(CONCURRENT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not any(t.is_alive() for t in threads)
    return (status_kb(server.proc.pid, "VmHWM") - before) / 1024, statuses


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_getaffinity"), reason="Linux /proc only")
def test_the_decoded_budget_bounds_peak_rss_under_the_black_png_attack(tmp_path):
    (tmp_path / "w.yaml").write_text("rewards:\n  - name: w\n    reward_model: tests.serve.rewards:ImageWidth\n")
    body = attack_body()
    assert len(body) < 200_000  # ~16 kB per PNG on the wire, 3 MiB decoded
    per_request = wire.decoded_bytes(msgpack.unpackb(body))
    assert per_request == 3 * PER_REQUEST * SIDE**2 + 4 * SIDE**2
    growth = {}
    for name, budget_mb in (("budget", per_request / MIB * 1.1), ("unbounded", 1_000_000)):
        server = Server(
            tmp_path / "w.yaml", "--max-decoded-mb", f"{budget_mb:.3f}", log=tmp_path / f"{name}.log"
        ).start()
        try:
            growth[name], statuses = peak_growth_mib(server, body)
        finally:
            server.stop()
        assert set(statuses) <= {200, 503} and 200 in statuses, statuses  # waited for its share, or 503
    # with the budget at most ~one request's decoding is resident at a time; without it, several are
    assert growth["budget"] < 2.5 * per_request / MIB, growth
    assert growth["unbounded"] > growth["budget"] + 2 * per_request / MIB, growth


def test_budget_waits_in_order_then_refuses_with_retry_after_and_413_over_the_whole():
    async def main():
        budget = DecodeBudget(100, wait_s=0.2)
        order = []
        async with budget.hold(80):

            async def waiter(n, tag):
                async with budget.hold(n):
                    order.append(tag)

            first = asyncio.create_task(waiter(50, "big"))
            await asyncio.sleep(0.01)
            second = asyncio.create_task(waiter(10, "small"))  # fits now, but waits behind the earlier one
            await asyncio.sleep(0.01)
            assert order == [] and budget.used == 80
        await asyncio.gather(first, second)
        assert order == ["big", "small"] and budget.used == 0
        async with budget.hold(100):
            with pytest.raises(DecodeBusy, match="retry in"):
                async with budget.hold(1):
                    pass
        assert budget.used == 0 and not budget._waiters
        with pytest.raises(wire.WireError) as exc:
            async with budget.hold(101):
                pass
        assert exc.value.status == 413 and exc.value.limit == "max_decoded_bytes"

    asyncio.run(main())
