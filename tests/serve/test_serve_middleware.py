"""The app's middleware and exception handlers, called in process as ASGI (one event loop per test): a planted bug
is answered 500 ``internal`` in the request's format and the server keeps serving; ``max_in_flight`` and the drain
refuse from the drain's count; what the metrics count (refusals by kind; not Starlette's 404 / 405, not /metrics).
The same behaviour over real sockets is the other modules' (a ``rewardzoo serve`` subprocess)."""

from __future__ import annotations

import asyncio
import json
import logging

import numpy as np
import pytest

pytest.importorskip("starlette")
msgpack = pytest.importorskip("msgpack")

import rewardzoo.serve.app as app_module
from rewardzoo.serve.app import build_app
from rewardzoo.serve.options import ServeOptions
from rewardzoo.serve.service import RewardService
from rewardzoo.transport.wire import MSGPACK, dumps, encode_image

TOKEN = "middleware-token-3e9d"
AUTH = ("Authorization", f"Bearer {TOKEN}")
IMAGE = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
BODY = dumps({"protocol": 1, "samples": [{"image": encode_image(IMAGE, "raw")}]}, "msgpack")


@pytest.fixture
def app():
    service = RewardService({"rewards": [{"name": "jpeg", "reward_model": "jpeg_compressibility"}]})
    service.load()
    return build_app(service, ServeOptions(token=TOKEN, max_in_flight=2))


async def call(app, method: str, path: str, headers=(), body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (*headers, ("content-length", str(len(body))))],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8765),
    }
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    answer: dict = {"body": b""}

    async def receive():
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return answer["status"], answer["headers"], answer["body"]


def score(app, *headers) -> tuple[int, dict[str, str], bytes]:
    return call(app, "POST", "/v1/score", (("Content-Type", MSGPACK), *headers), BODY)


def test_a_bug_is_answered_500_internal_in_the_request_format_and_the_server_keeps_serving(app, monkeypatch, caplog):
    def planted(*args):
        raise RuntimeError("planted")

    async def run():
        monkeypatch.setattr(app_module, "_decode", planted)
        bug = await score(app, AUTH)
        monkeypatch.undo()
        return bug, await score(app, AUTH)

    with caplog.at_level(logging.ERROR, logger="rewardzoo.serve"):
        (status, headers, body), (after, _, answer) = asyncio.run(run())
    assert status == 500 and headers["content-type"] == MSGPACK
    assert msgpack.unpackb(body)["error"] == {"kind": "internal", "message": "RuntimeError: planted", "limit": None}
    assert "/v1/score request failed" in caplog.text and "planted" in caplog.text
    assert after == 200 and msgpack.unpackb(answer)["rewards"]["jpeg"][0] <= 0
    metrics = app.state.metrics
    assert metrics.requests[("/v1/score", 500)] == 1 and metrics.requests[("/v1/score", 200)] == 1
    assert dict(metrics.errors) == {"internal": 1} and metrics.samples == 1
    assert app.state.drain.in_flight == 0


def test_max_in_flight_and_the_drain_refuse_from_the_drains_count(app):
    drain = app.state.drain

    async def run():
        assert drain.enter() and drain.enter()  # two requests in flight: the limit
        full = await score(app, AUTH)
        drain.leave()
        room = await score(app, AUTH)
        drain.leave()
        drain.begin()
        return full, room, await score(app, AUTH)

    (full, headers, body), (room, _, _), (draining, drain_headers, drain_body) = asyncio.run(run())
    error = msgpack.unpackb(body)["error"]
    assert full == 503 and headers["retry-after"] == "1" and error["kind"] == "overloaded"
    assert "2 score requests in flight" in error["message"] and "max_in_flight=2" in error["message"]
    assert room == 200
    assert draining == 503 and drain_headers["retry-after"] == "1"
    assert msgpack.unpackb(drain_body)["error"]["kind"] == "draining"
    assert drain.in_flight == 0


def test_what_the_metrics_count(app):
    async def run():
        return [
            await call(app, "GET", "/v1/score", (AUTH,)),  # Starlette's 405
            await call(app, "GET", "/nowhere", (AUTH,)),  # Starlette's 404
            await call(app, "GET", "/metrics"),  # refused, not counted: /metrics is not a counted endpoint
            await call(app, "GET", "/v1/rewards"),
            await score(app),  # 401 answered in MessagePack, the request's format
            await score(app, ("Authorization", "Bearer wrong")),
            await call(app, "POST", "/v1/score", (AUTH, ("Content-Type", "application/python-pickle")), b"x"),
            await call(app, "GET", "/health"),
        ]

    answers = asyncio.run(run())
    assert [status for status, _, _ in answers] == [405, 404, 401, 401, 401, 403, 415, 200]
    _, headers, body = answers[4]
    assert headers["content-type"] == MSGPACK and headers["www-authenticate"] == "Bearer"
    assert msgpack.unpackb(body)["error"]["kind"] == "auth"
    assert json.loads(answers[6][2])["error"]["kind"] == "format"  # an unsupported format is answered in JSON
    metrics = app.state.metrics
    assert dict(metrics.requests) == {
        ("/v1/rewards", 401): 1,
        ("/v1/score", 401): 1,
        ("/v1/score", 403): 1,
        ("/v1/score", 415): 1,
    }
    assert dict(metrics.errors) == {"auth": 3, "format": 1}
