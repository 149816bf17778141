"""Slow and silent clients against a real server on 127.0.0.1 (issue 37, item 1): idle connections, headers sent
a line at a time (slowloris), a body that stops after 3 bytes. Each is cut by its deadline with a 408 (or, for a
silent one, closed), and /health and /ready keep answering while the score route is saturated. Every socket and
wait is bounded."""

from __future__ import annotations

import json
import socket
import time

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from .helpers import Server, request

IDLE_SOCKETS = 260
IDLE_S, HEADER_S, BODY_S = 1.0, 2.0, 2.0
WITHIN_S = 15.0  # the bound of every wait for the server to act


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


def test_a_body_that_stalls_gets_408_and_health_answers_while_score_is_saturated(server):
    stalled = []
    try:
        for _ in range(4):  # the server's whole score allowance (--max-connections 4), each 3 bytes of 1 MB
            s = connect(server)
            s.sendall(
                b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\n"
                b"Content-Length: 1048576\r\n\r\nabc"
            )
            stalled.append(s)
        time.sleep(0.3)
        status, answer, headers = request(
            server.url, "POST", "/v1/score", b"{}", {"Content-Type": "application/json"}, timeout=10
        )
        assert status == 503 and "max_in_flight=4" in json.loads(answer)["error"]["message"]
        assert headers.get("retry-after")
        assert request(server.url, "GET", "/health", timeout=10)[0] == 200
        assert request(server.url, "GET", "/ready", timeout=10)[0] == 200
        for s in stalled:
            answer = read_until_closed(s)
            assert answer.startswith(b"HTTP/1.1 408") and b"body did not arrive within 2 s" in answer, answer
        # the allowance is free again
        status, _, _ = request(
            server.url,
            "POST",
            "/v1/score",
            json.dumps({"protocol": 1, "samples": [{"prompt": "x"}]}).encode(),
            {"Content-Type": "application/json"},
            timeout=10,
        )
        assert status == 422
        assert "Traceback" not in server.output()
    finally:
        for s in stalled:
            s.close()


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
