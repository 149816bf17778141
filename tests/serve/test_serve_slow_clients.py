"""Slow and silent clients against a real server on 127.0.0.1 (issue 37, item 1; issue 49, item 7): idle
connections, headers sent a line at a time (slowloris), bodies that stop after 3 bytes or drip a byte at a time.
Each is cut by its deadline with a 408 (or, for a silent one, closed) — the body's deadline is total, however
steadily it drips — and none holds a score place while its body arrives: an honest request is answered
throughout. Bodies past the reception budget get 503 at once. Every socket and wait is bounded."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from .helpers import Server, request

IDLE_SOCKETS = 260
IDLE_S, HEADER_S, BODY_S = 1.0, 2.0, 2.0
WITHIN_S = 15.0  # the bound of every wait for the server to act
RECEIVING_KB = 256  # --max-receiving-mb: bytes of bodies being received at once
HONEST = json.dumps({"protocol": 1, "samples": [{"prompt": "x"}]}).encode()


def honest_answer(server) -> tuple[int, float]:
    """An honest score request's status and seconds (422: answered; a jpeg reward needs an image)."""
    started = time.monotonic()
    status, _, _ = request(server.url, "POST", "/v1/score", HONEST, {"Content-Type": "application/json"}, timeout=10)
    return status, time.monotonic() - started


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_slow")
    (root / "jpeg.yaml").write_text("rewards:\n  - name: jpeg\n    reward_model: jpeg_compressibility\n")
    srv = Server(
        root / "jpeg.yaml",
        "--max-connections",
        "4",
        "--idle-timeout-s",
        str(IDLE_S),
        "--header-timeout-s",
        str(HEADER_S),
        "--body-timeout-s",
        str(BODY_S),
        "--max-receiving-mb",
        str(RECEIVING_KB / 1024),
    ).start()
    yield srv
    srv.stop()


def connect(server) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=WITHIN_S)
    s.settimeout(WITHIN_S)
    return s


def read_until_closed(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (socket.timeout after WITHIN_S: it did not)."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_260_idle_connections_do_not_block_health_ready_or_score_and_are_closed(server):
    sockets = [connect(server) for _ in range(IDLE_SOCKETS)]
    try:
        started = time.monotonic()
        assert request(server.url, "GET", "/health", timeout=10)[0] == 200
        assert request(server.url, "GET", "/ready", timeout=10)[0] == 200
        status, answer, _ = request(
            server.url,
            "POST",
            "/v1/score",
            json.dumps({"protocol": 1, "samples": [{"prompt": "x"}]}).encode(),
            {"Content-Type": "application/json"},
            timeout=10,
        )
        assert status == 422, answer  # answered (a jpeg reward needs an image), not 503
        for s in sockets:  # every silent connection is closed by the server, without an answer
            assert read_until_closed(s) == b""
        assert time.monotonic() - started < WITHIN_S
    finally:
        for s in sockets:
            s.close()


def test_slowloris_headers_get_408_after_the_header_deadline(server):
    s = connect(server)
    try:
        s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\n")
        started, answer = time.monotonic(), b""
        s.settimeout(0.3)
        while time.monotonic() - started < WITHIN_S:  # one more header line every 0.3 s, never the blank line
            try:
                s.sendall(b"X-Slow: 1\r\n")
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
            except TimeoutError:
                continue
            except OSError:  # reset once closed
                break
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"headers did not arrive within 2 s" in answer
        assert time.monotonic() - started < WITHIN_S
    finally:
        s.close()


def stalled_body(server, sent: bytes, length: int = 1048576) -> socket.socket:
    s = connect(server)
    s.sendall(
        b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\n"
        + f"Content-Length: {length}\r\n\r\n".encode()
        + sent
    )
    return s


def test_bodies_that_stall_hold_no_score_place_and_get_408(server):
    """Before issue 49 (item 7) a stalled body held its in-flight place: --max-connections of them kept /v1/score at
    503 until the deadline; now the place is taken once the body has arrived."""
    stalled = []
    try:
        for _ in range(4):  # as many as the server's score places (--max-connections 4), each 3 bytes of 1 MB
            stalled.append(stalled_body(server, b"abc"))
        time.sleep(0.3)
        status, seconds = honest_answer(server)
        assert status == 422 and seconds < 2, (status, seconds)
        assert request(server.url, "GET", "/health", timeout=10)[0] == 200
        assert request(server.url, "GET", "/ready", timeout=10)[0] == 200
        for s in stalled:
            answer = read_until_closed(s)
            assert answer.startswith(b"HTTP/1.1 408") and b"body did not arrive within 2 s" in answer, answer
        assert honest_answer(server)[0] == 422
        assert "Traceback" not in server.output()
    finally:
        for s in stalled:
            s.close()


def test_40_dripping_bodies_are_cut_at_a_total_deadline_while_an_honest_client_is_answered(server):
    """Slow senders that keep sending (a byte every 0.2 s): a deadline reset per chunk would never end them."""
    clients, answers, cut = 40, [], {}

    def drip(i: int) -> None:
        s = stalled_body(server, b"", length=4096)
        started, answer = time.monotonic(), b""
        s.settimeout(0.2)
        try:
            while time.monotonic() - started < WITHIN_S:
                try:
                    s.sendall(b"x")
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
                except TimeoutError:
                    continue
                except OSError:
                    break
        finally:
            s.close()
        cut[i] = (answer, time.monotonic() - started)

    threads = [threading.Thread(target=drip, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    while any(t.is_alive() for t in threads) and len(answers) < 40:
        answers.append(honest_answer(server))
        time.sleep(0.1)
    for t in threads:
        t.join(WITHIN_S + 5)
    assert len(cut) == clients
    for answer, seconds in cut.values():
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert seconds < BODY_S + 3, seconds  # the deadline counts from the headers, not from the last byte
    assert len(answers) >= 5 and {status for status, _ in answers} == {422}, answers
    assert max(seconds for _, seconds in answers) < 2, answers


def test_bodies_past_the_reception_budget_get_503_at_once_without_holding_anything(server):
    holder = stalled_body(server, b"\x00" * (200 * 1024))  # 200 kB of the 256 kB being received
    try:
        time.sleep(0.3)
        started = time.monotonic()
        late = stalled_body(server, b"\x00" * (100 * 1024))
        answer = read_until_closed(late)
        late.close()
        assert answer.startswith(b"HTTP/1.1 503") and b"max_receiving_bytes" in answer, answer[:300]
        assert time.monotonic() - started < 1.5  # at once, not at the body deadline
        assert honest_answer(server)[0] == 422  # a small body still fits
        assert read_until_closed(holder).startswith(b"HTTP/1.1 408")
        assert honest_answer(server)[0] == 422
    finally:
        holder.close()


def test_oversized_headers_get_431(server):
    s = connect(server)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 100_000)
        answer = read_until_closed(s)
        assert answer.startswith(b"HTTP/1.1 431") or answer.startswith(b"HTTP/1.1 400"), answer[:200]
    except ConnectionResetError:
        pass  # closed while we were still sending: refused all the same
    finally:
        s.close()


def test_large_framed_bodies_read_into_place_are_budgeted_and_cut_like_the_others(server):
    """A framed body of 1 MiB or more is read by the kernel straight into its buffer (uvicorn_server.BodySink): its
    bytes still count in the reception budget as they arrive, and its deadline still holds."""

    def framed(sent: bytes) -> socket.socket:
        s = connect(server)
        s.sendall(
            b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-rewardzoo-frames\r\n"
            + b"Content-Length: 2097152\r\n\r\n"
            + sent
        )
        return s

    holder = framed(b"\x00" * (200 * 1024))
    try:
        time.sleep(0.3)
        late = framed(b"\x00" * (100 * 1024))
        answer = read_until_closed(late)
        late.close()
        assert answer.startswith(b"HTTP/1.1 503") and b"max_receiving_bytes" in answer, answer[:300]
        assert b"retry-after: 1" in answer.lower()
        assert honest_answer(server)[0] == 422
        answer = read_until_closed(holder)
        assert answer.startswith(b"HTTP/1.1 408") and b"body did not arrive within 2 s" in answer, answer[:300]
        again = framed(b"\x00" * (250 * 1024))  # fits only if the cut bodies gave their bytes back
        again.settimeout(0.5)
        with pytest.raises(TimeoutError):
            again.recv(65536)  # no 503: it is being received
        again.close()
        assert "Traceback" not in server.output()
    finally:
        holder.close()
