"""The shared HTTP client against a real HTTP server on 127.0.0.1 (the standard library's)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rewardzoo.errors import ConfigError, HttpError
from rewardzoo.transport import http as rz_http
from rewardzoo.transport.http import HttpClient, RetryPolicy, bearer_headers, parse_retry_after


class Script:
    """What the server answers, request by request: a list of (status, headers, body, delay_s)."""

    def __init__(self):
        self.answers: list[tuple[int, dict, bytes, float]] = []
        self.default = (200, {}, b'{"ok": true}', 0.0)
        self.seen: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.close_after_answer = False
        self.connections: set[int] = set()


def make_handler(script: Script):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with script.lock:
                script.seen.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                script.connections.add(id(self.connection))
                status, headers, payload, delay = script.answers.pop(0) if script.answers else script.default
                script.in_flight += 1
                script.max_in_flight = max(script.max_in_flight, script.in_flight)
            try:
                if delay:
                    time.sleep(delay)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                if script.close_after_answer:  # drop the kept-alive connection without saying so
                    self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with script.lock:
                    script.in_flight -= 1

        do_GET = do_POST = _answer

    return Handler


@pytest.fixture()
def server():
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    script.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield script
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


@pytest.fixture()
def waits(monkeypatch):
    recorded: list[float] = []
    monkeypatch.setattr(rz_http, "_sleep", recorded.append)
    return recorded


def test_retries_503_then_succeeds_with_doubling_backoff(server, waits):
    server.answers = [(503, {}, b"busy", 0.0), (503, {}, b"busy", 0.0)]
    with HttpClient(server.url, policy=RetryPolicy(attempts=4, backoff_s=0.25)) as client:
        assert client.post_json("/score", {"x": 1}) == {"ok": True}
    assert len(server.seen) == 3
    assert waits == [0.25, 0.5]
    assert json.loads(server.seen[-1]["body"]) == {"x": 1}


def test_retry_after_is_honoured_within_the_cap(server, waits):
    server.answers = [(429, {"Retry-After": "3"}, b"", 0.0), (503, {"Retry-After": "120"}, b"", 0.0)]
    with HttpClient(server.url, policy=RetryPolicy(backoff_s=0.1, max_backoff_s=5.0)) as client:
        client.get_json("/x")
    assert waits == [3.0, 5.0]


def test_non_retryable_status_raises_at_once_with_the_body(server, waits):
    server.answers = [(400, {}, b'{"error": "field image: not a PNG"}', 0.0)]
    with HttpClient(server.url, label="reward server") as client, pytest.raises(HttpError) as info:
        client.post_json("/score", {})
    err = info.value
    assert (err.status, err.attempts, waits) == (400, 1, [])
    assert "not a PNG" in str(err) and "/score" in str(err)


def test_persistent_5xx_raises_after_the_last_try(server, waits):
    server.default = (500, {}, b"boom", 0.0)
    with (
        HttpClient(server.url, policy=RetryPolicy(attempts=3, backoff_s=0.01)) as client,
        pytest.raises(HttpError) as info,
    ):
        client.get_json("/x")
    assert (info.value.status, info.value.attempts, len(server.seen)) == (500, 3, 3)


def test_refused_connection_is_retried_then_raised(waits):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the client connects
    with (
        HttpClient(f"http://127.0.0.1:{port}", policy=RetryPolicy(attempts=3, backoff_s=0.01)) as client,
        pytest.raises(HttpError) as info,
    ):
        client.get_json("/x")
    assert info.value.status is None and info.value.attempts == 3 and len(waits) == 2


def test_a_hanging_server_times_out_once_and_is_not_asked_again(server, waits):
    server.answers = [(200, {}, b"{}", 2.0)]
    with (
        HttpClient(server.url, policy=RetryPolicy(attempts=4, timeout_s=0.3)) as client,
        pytest.raises(HttpError, match="no answer within 0.3 s") as info,
    ):
        client.get_json("/x")
    assert info.value.attempts == 1 and waits == [] and len(server.seen) == 1


def test_garbage_json_is_an_error_naming_the_body(server):
    server.answers = [(200, {}, b"<html>oops", 0.0)]
    with HttpClient(server.url) as client, pytest.raises(HttpError, match="not JSON.*oops"):
        client.get_json("/x")


def test_keep_alive_reuses_one_connection_and_survives_a_dropped_one(server):
    with HttpClient(server.url, policy=RetryPolicy(attempts=1)) as client:
        for _ in range(5):
            client.get_json("/x")
        assert len(server.connections) == 1
        server.close_after_answer = True  # the server now drops every connection after answering
        for _ in range(3):  # a stale kept-alive connection is reopened without costing the only try
            assert client.get_json("/x") == {"ok": True}
    assert len(server.seen) == 8


def test_map_bounds_concurrency_and_keeps_order(server):
    server.default = (200, {}, b"{}", 0.1)

    def call(i):
        client.get_json(f"/item/{i}")
        return i

    with HttpClient(server.url, max_concurrency=3) as client:
        assert client.map(call, range(9)) == list(range(9))
    assert 1 < server.max_in_flight <= 3


def test_map_raises_the_first_error_and_cancels_the_rest(server):
    server.default = (200, {}, b"{}", 0.05)
    started: list[int] = []

    def call(i):
        started.append(i)
        if i == 1:
            raise ValueError("sample 1 is bad")
        client.get_json("/x")
        return i

    with HttpClient(server.url, max_concurrency=2) as client, pytest.raises(ValueError, match="sample 1"):
        client.map(call, range(40))
    assert len(started) < 40


def test_bearer_token_comes_from_the_environment_and_never_shows(monkeypatch, server):
    monkeypatch.delenv("RZ_TEST_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="RZ_TEST_TOKEN is not set") as info:
        bearer_headers("RZ_TEST_TOKEN", owner="judge")
    monkeypatch.setenv("RZ_TEST_TOKEN", "s3cret-value")
    headers = bearer_headers("RZ_TEST_TOKEN", owner="judge")
    assert headers == {"Authorization": "Bearer s3cret-value"} and bearer_headers(None, owner="judge") == {}
    server.answers = [(401, {}, b"unauthorized", 0.0)]
    with HttpClient(server.url, headers=headers) as client, pytest.raises(HttpError) as info:
        client.get_json("/x")
    assert server.seen[-1]["headers"]["Authorization"] == "Bearer s3cret-value"
    assert "s3cret" not in str(info.value) and "s3cret" not in repr(client)


def test_policy_from_options_and_retry_after_dates():
    policy = RetryPolicy.from_options({"retries": 0, "timeout_s": 2, "backoff_s": "0.2"}, owner="judge")
    assert (policy.attempts, policy.timeout_s, policy.backoff_s) == (1, 2.0, 0.2)
    with pytest.raises(ConfigError, match="retries"):
        RetryPolicy.from_options({"retries": -1}, owner="judge")
    with pytest.raises(ConfigError, match="timeout_s"):
        RetryPolicy.from_options({"timeout_s": 0}, owner="judge")
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    with pytest.raises(ConfigError, match="http"):
        HttpClient("ftp://example.org")


@pytest.mark.parametrize("declared", [True, False])
def test_an_answer_over_the_cap_is_an_error_naming_it_and_is_not_retried(server, waits, declared, monkeypatch):
    import http.client as hc

    server.answers = [(200, {}, b"x" * 5000, 0.0)]
    if not declared:  # the cap holds as the answer arrives too, not only from Content-Length
        original = hc.HTTPResponse.getheader
        monkeypatch.setattr(
            hc.HTTPResponse,
            "getheader",
            lambda self, name, default=None: (
                default if name.lower() == "content-length" else original(self, name, default)
            ),
        )
    with (
        HttpClient(server.url, max_response_bytes=4096) as client,
        pytest.raises(HttpError, match="max_response_bytes=4096") as info,
    ):
        client.get_json("/big")
    monkeypatch.undo()
    assert info.value.attempts == 1 and len(server.seen) == 1 and waits == []
    with HttpClient(server.url, max_response_bytes=8192) as client:  # within the cap: read
        server.answers = [(200, {}, b'{"n": "' + b"y" * 5000 + b'"}', 0.0)]
        assert len(client.get_json("/big")["n"]) == 5000


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 413, 415, 422])
def test_client_errors_are_never_retried(server, waits, status):
    server.default = (status, {"Retry-After": "1"}, b'{"error": {"message": "no"}}', 0.0)
    with HttpClient(server.url, policy=RetryPolicy(attempts=4)) as client, pytest.raises(HttpError) as info:
        client.post_json("/score", {})
    assert (info.value.status, info.value.attempts, len(server.seen), waits) == (status, 1, 1, [])


def test_a_server_that_drips_its_answer_is_cut_off_at_the_timeout_not_per_read():
    """Headers, then one body byte every 0.2 s: each read is within the 1 s timeout, the whole answer never is."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Type: application/json\r\n\r\n")
            for _ in range(150):  # 30 s at most
                if stop.wait(0.2):
                    return
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        start = time.monotonic()
        with HttpClient(url, policy=RetryPolicy(attempts=3, timeout_s=1.0)) as client:
            with pytest.raises(HttpError, match=r"no answer within 1 s \(cut off\)") as info:
                client.get_json("/x")
        elapsed = time.monotonic() - start
        assert info.value.attempts == 1
        assert elapsed < 10  # not the 30 s the drip would last (a bound on a hang, not a speed claim)
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.parametrize("cap", [None, 1 << 20])
def test_an_answer_cut_short_by_a_dying_server_is_retried_not_taken(waits, cap):
    """A server that dies mid-answer (Content-Length 100, 10 bytes, then closed) sent no answer: the next try's
    whole answer is returned, whether or not the client caps what it reads (read(n) returns short reads silently)."""
    listener = socket.create_server(("127.0.0.1", 0))
    whole = json.dumps({"ok": True}).encode()

    def serve():
        for cut in (True, False):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                if cut:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b'{"ok": tru')
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(whole))
                    conn.sendall(whole)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with HttpClient(url, policy=RetryPolicy(attempts=2, timeout_s=5.0), max_response_bytes=cap) as client:
            assert client.get_json("/x") == {"ok": True}
        assert len(waits) == 1  # one failed try, then the answer
    finally:
        thread.join(5)
        listener.close()
