"""The server's middleware, pure ASGI, one concern each; the app (:mod:`~rewardzoo.serve.app`) says which route
passes which, in order. A check that fails raises a :class:`~rewardzoo.serve.refusals.Refusal` (or the wire's
413 / 400 / 415), which the app's exception handlers answer.

- :class:`Counted` (the whole app) — each answered request in the metrics, and a bug's 500;
- :class:`Authenticated` — the bearer token; :class:`WireFormat` — MessagePack or JSON; :class:`Ready` — the
  models are loaded; :class:`Arriving` — the batcher waits for this request while its body comes;
  :class:`BodyLimit` — the body's size; :class:`Received` — the whole body, read within the
  bytes being received across requests (:class:`ReceptionBudget`) before anything else is held;
  :class:`Admitted` — the in-flight count and the drain, for requests whose body has arrived.

A slow sender therefore holds its connection and the bytes it has sent, never an in-flight place: the protocol's
body deadline (total from the headers, :func:`~rewardzoo.serve.uvicorn_server.guarded_protocol`) closes it.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..transport.wire import WireError, WireLimits, format_of
from .batching import Batcher
from .drain import Drain
from .metrics import Metrics
from .refusals import Refusal, answer, internal
from .service import RewardService

log = logging.getLogger("rewardzoo.serve")
#: A body declared larger than this is refused without reading it (the connection is closed); smaller
#: bodies over the limit are read and discarded so the client sees the 413 instead of a broken pipe.
DRAIN_BYTES = 2**30


class Counted:
    """Counts each request to one of ``endpoints`` that the app answered in the metrics: its status, latency,
    samples (``state.samples``, set by the handler) and error kind (``state.error``, set by the refusal).
    Starlette's own 404 and 405 are not counted. An error no exception handler takes is a bug: logged with its
    traceback and answered 500 ``internal``, the server keeps serving."""

    def __init__(self, app: ASGIApp, metrics: Metrics, endpoints: tuple[str, ...]) -> None:
        self.app, self.metrics, self.endpoints = app, metrics, endpoints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.monotonic(), 0
        state = scope.setdefault("state", {})

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        except Exception as exc:
            if status:  # the answer has begun: nothing to add to it
                raise
            log.error("%s request failed", scope["path"], exc_info=exc)
            await answer(scope, internal(exc))(scope, receive, sent)
        if scope["path"] in self.endpoints and status not in (404, 405):
            seconds = time.monotonic() - started
            self.metrics.request(
                scope["path"], status, seconds, samples=state.get("samples", 0), error=state.get("error")
            )


class Arriving:
    """The request counted as arriving at ``batcher`` (:meth:`~rewardzoo.serve.batching.Batcher.arrival`) from
    here until the route submits it (``state.arrival``) or it ends: a batch ready to run waits for it, not for
    requests that may never come."""

    def __init__(self, app: ASGIApp, batcher: Batcher) -> None:
        self.app, self.batcher = app, batcher

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self.batcher.arrival() as arrival:
            scope.setdefault("state", {})["arrival"] = arrival
            await self.app(scope, receive, send)


class Authenticated:
    """401 without ``Authorization: Bearer <token>`` (with WWW-Authenticate), 403 with another token (compared
    in constant time)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            raise Refusal(
                401, "auth", "this server needs 'Authorization: Bearer <token>'", headers={"WWW-Authenticate": "Bearer"}
            )
        if not hmac.compare_digest(given.strip().encode(), self.token):
            raise Refusal(403, "auth", "the bearer token is not valid")
        await self.app(scope, receive, send)


class WireFormat:
    """415 for a body that is neither MessagePack nor JSON (a pickle); the format in ``state.fmt``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault("state", {})["fmt"] = format_of(Headers(scope=scope).get("content-type"))
        await self.app(scope, receive, send)


class Ready:
    """503 with Retry-After while the service's models load (naming the loading error if it failed)."""

    def __init__(self, app: ASGIApp, service: RewardService) -> None:
        self.app, self.service = app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.service.ready:
            error = self.service.load_error
            detail = f" (loading failed: {error})" if error else ""
            raise Refusal(503, "not_ready", f"the models are still loading{detail}", headers={"Retry-After": "2"})
        await self.app(scope, receive, send)


class Admitted:
    """A score request's place, counted by the drain until its answer is sent: 503 with Retry-After past
    ``max_in_flight`` requests in flight (decoding, queued or scored: taken once the body has arrived,
    :class:`Received`), or once the drain has begun."""

    def __init__(self, app: ASGIApp, drain: Drain, max_in_flight: int) -> None:
        self.app, self.drain, self.max_in_flight = app, drain, max_in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.drain.in_flight >= self.max_in_flight:
            raise Refusal(
                503,
                "overloaded",
                f"the server has {self.drain.in_flight} score requests in flight (its "
                f"limit max_in_flight={self.max_in_flight}); retry later",
                headers={"Retry-After": "1"},
            )
        if not self.drain.enter():
            raise Refusal(
                503,
                "draining",
                "this server is stopping; send the request to another one",
                headers={"Retry-After": "1"},
            )
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.leave()


class BodyLimit:
    """413 naming ``max_request_bytes`` once the body read so far is over it; 400 for a Content-Length that is not
    a number. See :data:`DRAIN_BYTES`: an over-limit body is read to its end and dropped, never kept."""

    def __init__(self, app: ASGIApp, limits: WireLimits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limits, limit = self.limits, self.limits.max_request_bytes
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and not declared.strip().isdigit():
            raise WireError("the Content-Length header is not a number")
        if limit is None:
            await self.app(scope, receive, send)
            return
        if declared is not None and int(declared) > DRAIN_BYTES:
            limits.over("max_request_bytes", int(declared), f"the request body ({declared} bytes, from Content-Length)")
        size = 0

        async def bounded() -> Message:
            nonlocal size
            message = await receive()
            while message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size <= limit:
                    return message
                if not message.get("more_body", False):
                    limits.over("max_request_bytes", size, f"the request body ({size} bytes)")
                message = await receive()  # over the limit: read on so the client gets the answer, keep nothing
            return message  # the client went away: the reader raises ClientDisconnect

        await self.app(scope, bounded, send)


class ReceptionBudget:
    """Bytes of request bodies being received at once, across requests (``limit``; None: no bound). Counts what has
    arrived, not what a Content-Length promises: a slow sender holds only the bytes it has sent, so many of them
    cannot lock out a client whose body arrives at once."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.used = limit, 0

    def take(self, n: int) -> None:
        """``n`` more bytes arrived; a :class:`Refusal` 503 (connection closed) when they would go past the limit."""
        if self.limit is not None and self.used + n > self.limit:
            raise Refusal(
                503,
                "overloaded",
                f"the server is receiving {self.used} bytes of request bodies (its limit max_receiving_bytes="
                f"{self.limit}); retry later",
                limit="max_receiving_bytes",
                headers={"Retry-After": "1", "Connection": "close"},
            )
        self.used += n

    def give(self, n: int) -> None:
        self.used -= n


class ReceivedBody:
    """A request's body as it arrives (a ``bytearray``, grown in place) and its share of the reception budget, held
    until :meth:`release` (the handler releases it once its memory budget counts the body instead)."""

    def __init__(self, budget: ReceptionBudget) -> None:
        self.data, self.budget, self.held = bytearray(), budget, 0

    def add(self, chunk: bytes) -> None:
        self.budget.take(len(chunk))
        self.held += len(chunk)
        self.data += chunk

    def adopt(self, data: Any, held: int) -> None:
        """The whole body, received elsewhere into ``data`` (a writable buffer nothing else holds), with its ``held``
        bytes already in the reception budget (given back with :meth:`release`)."""
        if self.data:
            raise RuntimeError("a body received in place cannot follow chunks received here")
        self.data, self.held = data, self.held + held

    def release(self) -> None:
        self.budget.give(self.held)
        self.held = 0

    def take(self) -> Any:
        """The body, handed over (this object keeps none of it)."""
        data, self.data = self.data, bytearray()
        return data


class Received:
    """Reads the whole body (through :class:`BodyLimit`, outside it) before the route's next middleware runs, into
    ``state.body`` (a :class:`ReceivedBody`); the app downstream receives an empty body. A client that goes away
    first is a ClientDisconnect (499)."""

    def __init__(self, app: ASGIApp, budget: ReceptionBudget) -> None:
        self.app, self.budget = app, budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = ReceivedBody(self.budget)
        try:
            more = True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    raise ClientDisconnect()
                body.add(message.get("body", b""))
                more = message.get("more_body", False)
            state = scope.setdefault("state", {})
            sunk = state.pop("rewardzoo.body", None)  # read into place by the protocol (uvicorn_server.BodySink)
            if sunk is not None:
                body.adopt(*sunk)
                del sunk  # the body's only holder is now the handler (it frees the buffer once answered)
            state["body"] = body
            replayed = False

            async def rest() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": b"", "more_body": False}
                return await receive()

            await self.app(scope, rest, send)
        finally:
            body.release()
