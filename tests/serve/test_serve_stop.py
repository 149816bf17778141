"""SIGTERM stops ``rewardzoo serve`` and ``rewardzoo serve --ray`` by draining: with a request held in flight,
``/ready`` answers 503, a new request is refused with 503 ``draining``, the held request is answered, and the
process exits 0 (with ``--ray``: no C++ stack dump from Ray's handler, and its Ray processes gone)."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
psutil = pytest.importorskip("psutil")

from rewardzoo.serve.drain import DRAINED_NOTICE, Drain
from rewardzoo.transport import wire

from .helpers import Server, get, request

PROMPT = "abcdef"
#: The longest any one wait of these tests takes (each loop below is bounded by it, in steps of 0.05-0.1 s).
WAIT_S = 60.0


def held_config(root: Path, ray: str = "") -> Path:
    """A config whose reward holds its call until ``release`` exists; ``ray``: the entry's ``ray:`` block."""
    started, release = root / "started", root / "release"
    path = root / "held.yaml"
    path.write_text(
        "rewards:\n  - name: held\n    reward_model: tests.serve.rewards:HeldLength\n"
        f"    kwargs: {{started: '{started}', release: '{release}', hold_s: {WAIT_S}}}\n"
        + (f"    ray: {ray}\n" if ray else "")
    )
    return path


def wait_until(condition, what: str, server: Server, step: float = 0.05) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {WAIT_S} s: {server.output()[-3000:]}")
        time.sleep(step)


def score(server: Server) -> tuple[int, bytes, dict[str, str]]:
    body = wire.encode_request([{"prompt": PROMPT}], fmt="json")
    return request(
        server.url, "POST", "/v1/score", body, {"Content-Type": wire.content_type("json")}, timeout=WAIT_S * 2
    )


def ready_status(server: Server) -> tuple[int, bytes]:
    try:
        return get(server.url, "/ready")
    except OSError:
        return 0, b""


def names(processes: list) -> list[str]:
    out = []
    for p in processes:
        try:
            out.append(p.name())
        except psutil.Error:  # gone meanwhile
            pass
    return out


def stop_with_a_request_in_flight(server: Server, root: Path) -> tuple[list, list[str]]:
    """SIGTERM while a request is held; checks the drain; the server's processes and their names before it."""
    answer: dict = {}
    held = threading.Thread(target=lambda: answer.setdefault("held", score(server)), daemon=True)
    held.start()
    wait_until((root / "started").exists, "the held request reaching the reward", server)
    processes = psutil.Process(server.proc.pid).children(recursive=True)
    before = names(processes)

    server.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: ready_status(server)[0] == 503, "/ready answering 503", server, step=0.1)
    assert json.loads(ready_status(server)[1]) == {"ready": False, "draining": True}
    status, body, headers = score(server)
    assert status == 503 and json.loads(body)["error"]["kind"] == "draining" and headers["retry-after"] == "1"
    assert held.is_alive() and server.proc.poll() is None, "the server stopped before its request was answered"

    (root / "release").touch()
    held.join(WAIT_S)
    status, body, _ = answer["held"]
    assert status == 200 and json.loads(body)["rewards"] == {"held": [float(len(PROMPT))]}
    assert server.proc.wait(WAIT_S) == 0
    output = server.output()
    assert DRAINED_NOTICE in output and "SIGTERM received" not in output
    return processes, before


def test_serve_drains_a_request_in_flight_on_sigterm_and_exits_0(tmp_path):
    server = Server(held_config(tmp_path)).start()
    try:
        stop_with_a_request_in_flight(server, tmp_path)
    finally:
        server.stop()


def test_serve_ray_drains_on_sigterm_exits_0_and_leaves_no_ray_process(tmp_path):
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'rewardzoo[serve-ray]')")
    from rewardzoo.serve.ray_serve import MAX_ONGOING_REQUESTS

    # the held call runs in the entry's own deployment: the front's drain waits for it there
    config = held_config(tmp_path, ray="{num_cpus: 0.5, num_gpus: 0}")
    server = Server(config, "--ray", "--replicas", "1", "--cpus-per-replica", "0.5").start()
    try:
        processes, before = stop_with_a_request_in_flight(server, tmp_path)
        assert "raylet" in before and "gcs_server" in before  # the Ray instance `serve --ray` started
        # the placement it announced at start is the entry's block, the left-out keys from the flags
        assert (
            "deployment rewardzoo-held (held): 1 replica(s), 0 GPU and 0.5 CPU each, at most "
            f"{MAX_ONGOING_REQUESTS} request(s) in flight" in server.output()
        )

        def gone() -> bool:
            return not [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

        wait_until(gone, "the Ray processes exiting", server, step=0.1)
    finally:
        server.stop()


def test_the_drain_refuses_new_requests_and_waits_only_for_those_in_flight():
    drain = Drain()
    assert drain.enter() and drain.enter() and not drain.draining
    assert not drain.wait_idle(0.01)  # not stopping: never idle
    drain.begin()
    assert drain.draining and not drain.enter() and drain.in_flight == 2
    drain.leave()
    assert not drain.wait_idle(0.01)
    threading.Timer(0.05, drain.leave).start()
    assert drain.wait_idle(WAIT_S) and drain.in_flight == 0


def test_a_drain_past_its_timeout_stops_and_counts_the_requests_it_cut():
    import uvicorn

    from rewardzoo.serve.uvicorn_server import DrainingServer

    drain = Drain()
    server = DrainingServer(uvicorn.Config(lambda scope, receive, send: None), drain, timeout_s=0.2)
    assert drain.enter()
    server.handle_exit(signal.SIGTERM, None)
    assert not drain.draining and not server.should_exit  # nothing happens inside the signal handler
    assert asyncio.run(server.on_tick(1)) is False and drain.draining  # draining, the request still in flight
    assert server._captured_signals == []  # so uvicorn does not re-raise SIGTERM once stopped
    time.sleep(0.25)
    assert asyncio.run(server.on_tick(2)) is True and server.cut == 1 and server.force_exit

    again = DrainingServer(uvicorn.Config(lambda scope, receive, send: None), Drain(), timeout_s=WAIT_S)
    again.handle_exit(signal.SIGTERM, None)
    again.handle_exit(signal.SIGTERM, None)  # a second SIGTERM stops at once, as uvicorn's own does
    assert again.should_exit
