"""uvicorn for ``rewardzoo serve``: :class:`DrainingServer`, which stops on SIGTERM by draining (see
:mod:`~rewardzoo.serve.drain`). Imports uvicorn; only :func:`~rewardzoo.serve.server.serve_command` imports it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mmap
import signal
import time
from types import FrameType
from typing import Any

import uvicorn

from ..transport.wire import FRAMES
from .drain import Drain

log = logging.getLogger("rewardzoo.serve")


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose SIGTERM drains ``drain`` (listening on, so ``/ready`` can answer 503) and then
    stops, as a plain uvicorn does on SIGINT; :attr:`cut` counts the requests the timeout left unanswered.

    uvicorn re-raises the signal it stopped on once it has shut down (a SIGTERM would then kill the process);
    a drained SIGTERM is not re-raised, so the command returns and exits 0. A second signal stops at once.
    """

    def __init__(self, config: uvicorn.Config, drain: Drain, timeout_s: float) -> None:
        super().__init__(config)
        self.drain, self.timeout_s = drain, timeout_s
        self.cut = 0
        self._term = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self._term and not self.should_exit:
            self._term = True  # the drain begins on the loop's next tick, not inside the signal handler
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._term and not self.drain.draining:
            self.drain.begin()
            log.warning("rewardzoo serve: SIGTERM, draining %d request(s) in flight", self.drain.in_flight)
        began = self.drain.began_at  # not None: draining
        if began is not None and not self.should_exit:
            if self.drain.in_flight == 0:
                return True
            if time.monotonic() - began > self.timeout_s:
                self.cut = self.drain.in_flight
                self.force_exit = True  # the rest are cancelled, not waited for
                return True
        return await super().on_tick(counter)


def guarded_protocol(
    header_timeout_s: float,
    body_timeout_s: float,
    max_header_bytes: int = 64 * 1024,
    *,
    sink: BodySink | None = None,
) -> type:
    """uvicorn's HTTP protocol (httptools, or h11 without it) with the read deadlines uvicorn lacks.

    A connection that has begun a request must deliver its headers within ``header_timeout_s`` (and at most
    ``max_header_bytes`` of them), and its body within ``body_timeout_s`` of the headers; past either it gets
    408 (431 for headers too large) and is closed. A connection that sends nothing is closed after uvicorn's
    ``timeout_keep_alive`` (the idle timeout), on its first request as after a response. While the app works on a
    request nothing is timed (the model's time is the client's timeout to set).

    ``sink`` (httptools only): a large body (a POST whose Content-Length is at least :data:`SINK_MIN_BYTES` and within
    the sink's limit) is read by the kernel straight into one buffer of its size (``asyncio.BufferedProtocol``:
    ``recv_into``), not in chunks copied by the event loop, the parser and the app: its bytes are charged to the
    reception budget as they arrive, and the app finds the buffer in ``scope["state"]["rewardzoo.body"]``
    (:class:`~rewardzoo.serve.middleware.Received` takes it).
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT

    buffered = sink is not None and hasattr(AutoHTTPProtocol, "on_body")

    class GuardedProtocol(AutoHTTPProtocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._phase, self._header_bytes = "idle", 0
            self._timer: asyncio.TimerHandle | None = None
            self._scratch = memoryview(bytearray(SCRATCH_BYTES)) if buffered else None
            self._sink: _Filling | None = None
            self._arm(self.timeout_keep_alive, 0, "")  # silent from the start: the idle timeout

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._sink is not None:  # a body cut off while it arrived: its bytes leave the reception budget
                self._sink.drop()
                self._sink = None
            super().connection_lost(exc)

        # -- asyncio.BufferedProtocol (with a sink): the transport reads into these buffers
        def get_buffer(self, sizehint: int) -> memoryview:
            filling = self._sink
            return filling.rest() if filling is not None else self._scratch  # type: ignore[return-value]

        def buffer_updated(self, nbytes: int) -> None:
            filling = self._sink
            if filling is None:
                self.data_received(bytes(self._scratch[:nbytes]))  # type: ignore[index]
                return
            refused = filling.arrived(nbytes)
            if refused is not None:
                self._sink = None
                filling.drop()
                return self._refuse(503, refused)
            if filling.full:
                self._sink = None
                self._delivered(filling)

        def _start_sink(self) -> None:
            """Right after the headers of a large body: the rest of it goes straight into one buffer."""
            cycle = self.cycle
            declared = _content_length(cycle.scope)
            if declared is None or not sink.takes(declared, cycle.scope):  # type: ignore[union-attr]
                return
            filling = _Filling(sink, declared)  # type: ignore[arg-type]
            refused = filling.arrived_bytes(cycle.body)  # what the parser passed on already, not yet received
            if refused is not None:
                filling.drop()
                return self._refuse(503, refused)
            cycle.body = bytearray()
            self._sink = filling
            self.flow.resume_reading()  # on_body may have paused it: the sink has room for the whole body
            if filling.full:
                self._sink = None
                self._delivered(filling)

        def _delivered(self, filling: _Filling) -> None:
            """The body is whole: handed to the app, the parser made anew for the connection's next request."""
            cycle = self.cycle
            cycle.scope.setdefault("state", {})["rewardzoo.body"] = filling.handed()
            parser: Any = type(self.parser)(self)  # type: ignore[has-type]
            with contextlib.suppress(AttributeError):
                parser.set_dangerous_leniencies(lenient_data_after_close=True)
            self.parser = parser
            self._phase = "app"
            self._disarm()
            self.on_message_complete()

        def data_received(self, data: bytes) -> None:
            if self._phase in ("idle", "headers"):
                self._header_bytes += len(data)
            super().data_received(data)
            if self.transport.is_closing():
                return self._disarm()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                if cycle.more_body and self._phase != "body":
                    self._phase = "body"
                    self._arm(body_timeout_s, 408, f"the request body did not arrive within {body_timeout_s:g} s")
                    if buffered and not self.parser.should_upgrade():
                        self._start_sink()
                elif not cycle.more_body and self._phase != "app":
                    self._phase = "app"
                    self._disarm()
                return
            if self._phase != "headers":  # the first bytes of a request (the previous one, if any, is answered)
                self._phase, self._header_bytes = "headers", len(data)
                self._arm(header_timeout_s, 408, f"the request headers did not arrive within {header_timeout_s:g} s")
            if self._header_bytes > max_header_bytes:
                self._refuse(431, f"the request headers are over {max_header_bytes} bytes")

        if hasattr(AutoHTTPProtocol, "on_body"):  # httptools: a body chunk handed on without uvicorn's two copies

            def on_body(self, body: bytes) -> None:
                """uvicorn's ``on_body``, but a chunk that arrives while none is pending is kept as the parser's
                own bytes (the app's ``receive`` hands it on as it is: ``bytes(b)`` of bytes is ``b``) instead of
                being copied into the cycle's bytearray and copied out again; chunks that pile up are joined as
                uvicorn does. 25 MB bodies arrive in 64-256 KiB chunks, nearly always one at a time."""
                cycle = self.cycle
                if (self.parser.should_upgrade() and self._should_upgrade()) or cycle.response_complete:
                    return
                if not cycle.body:
                    cycle.body = body
                else:
                    if isinstance(cycle.body, bytes):
                        cycle.body = bytearray(cycle.body)
                    cycle.body += body
                if len(cycle.body) > HIGH_WATER_LIMIT:
                    self.flow.pause_reading()
                cycle.message_event.set()

        def _arm(self, seconds: float, status: int, message: str) -> None:
            self._disarm()
            self._timer = self.loop.call_later(seconds, self._refuse, status, message)

        def _disarm(self) -> None:
            timer: asyncio.TimerHandle | None = getattr(self, "_timer", None)
            if timer is not None:
                timer.cancel()
                self._timer = None

        def _refuse(self, status: int, message: str) -> None:
            self._disarm()
            if self.transport.is_closing():
                return
            cycle = self.cycle
            if status and (cycle is None or cycle.response_complete or not cycle.response_started):
                body = json.dumps(
                    {
                        "protocol": 1,
                        "error": {
                            "kind": {408: "timeout", 503: "overloaded"}.get(status, "limit"),
                            "message": message,
                            "limit": "max_receiving_bytes" if status == 503 else None,
                        },
                    }
                ).encode()
                reason = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}[
                    status
                ]
                retry = "retry-after: 1\r\n" if status == 503 else ""
                self.transport.write(
                    f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n{retry}"
                    f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
            log.info("rewardzoo serve: closed a connection: %s", message or "idle")
            self.transport.close()

    if not buffered:
        return GuardedProtocol

    class BufferedGuardedProtocol(asyncio.BufferedProtocol):
        """The guarded protocol read through ``get_buffer`` / ``buffer_updated`` (an event loop reads into a
        ``BufferedProtocol``'s buffers only when it is not also an ``asyncio.Protocol``, as uvicorn's are): every
        call passed on to it."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.inner = GuardedProtocol(*args, **kwargs)

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.inner.connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            self.inner.connection_lost(exc)

        def eof_received(self) -> bool | None:
            return self.inner.eof_received()

        def pause_writing(self) -> None:
            self.inner.pause_writing()

        def resume_writing(self) -> None:
            self.inner.resume_writing()

        def get_buffer(self, sizehint: int) -> memoryview:
            return self.inner.get_buffer(sizehint)

        def buffer_updated(self, nbytes: int) -> None:
            self.inner.buffer_updated(nbytes)

    return BufferedGuardedProtocol


#: Bodies at least this large are read straight into their buffer (``guarded_protocol``'s sink).
SINK_MIN_BYTES = 1 << 20
#: The buffer a connection reads headers and small bodies into (then parsed as uvicorn does).
SCRATCH_BYTES = 256 * 1024


class BodySink:
    """Where large bodies go: ``budget`` (a :class:`~rewardzoo.serve.middleware.ReceptionBudget`) counts their bytes
    as they arrive; ``limit``: the largest body taken so (larger ones take uvicorn's path, and the app's 413);
    ``paths``: the routes whose bodies may (others take uvicorn's path)."""

    def __init__(self, budget: Any, limit: int | None, paths: tuple[str, ...] = ("/v1/score", "/v1/jobs")) -> None:
        self.budget, self.limit, self.paths = budget, limit, paths

    def takes(self, declared: int, scope: dict) -> bool:
        """Whether a request's body goes to a sink: a framed POST to one of ``paths``, large, within the limit."""
        within = self.limit is None or declared <= self.limit
        framed = any(n == b"content-type" and v.startswith(FRAMES.encode()) for n, v in scope.get("headers", []))
        return (
            framed
            and within
            and declared >= SINK_MIN_BYTES
            and scope.get("method") == "POST"
            and scope["path"] in self.paths
        )


class _Filling:
    """One body arriving into its buffer of its declared size (:func:`_uninitialised`: fresh pages are taken only as
    bytes land in them, so a Content-Length alone reserves no new memory), its bytes charged to the reception budget
    on arrival."""

    def __init__(self, sink: BodySink, size: int) -> None:
        self.sink, self.size, self.at, self.held = sink, size, 0, 0
        self.mem = _uninitialised(size)
        self.view = memoryview(self.mem)

    @property
    def full(self) -> bool:
        return self.at >= self.size

    def rest(self) -> memoryview:
        return self.view[self.at :]

    def arrived(self, n: int) -> str | None:
        """``n`` more bytes landed; why the body is refused (the reception budget is full), else None."""
        self.at += n
        try:
            self.sink.budget.take(n)
        except Exception as exc:  # a Refusal: the server is receiving too much at once
            return str(getattr(exc, "message", exc))
        self.held += n
        return None

    def arrived_bytes(self, data: bytes | bytearray) -> str | None:
        n = min(len(data), self.size)
        self.view[self.at : self.at + n] = data[:n]
        return self.arrived(n) if n else None

    def handed(self) -> tuple[Any, int]:
        """The body (a writable buffer only the app holds) and its bytes in the reception budget, now the app's."""
        held, self.held = self.held, 0
        return self.mem, held

    def drop(self) -> None:
        self.sink.budget.give(self.held)
        self.held = 0


def _content_length(scope: dict) -> int | None:
    """The request's Content-Length (None without one, with a Transfer-Encoding or when it is not a number)."""
    length = None
    for name, value in scope.get("headers", []):
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            if not value.strip().isdigit():
                return None
            length = int(value)
    return length


def _uninitialised(size: int) -> Any:
    """A ``bytearray`` of ``size`` bytes left as malloc gave them: no memset, so memory freed by earlier bodies is
    reused without page faults and fresh pages are taken only as bytes land in them. Every byte is written by the
    body before anyone reads it (a body cut short is dropped). An anonymous mapping where the C API is not there."""
    try:
        import ctypes

        make = ctypes.pythonapi.PyByteArray_FromStringAndSize
        make.restype, make.argtypes = ctypes.py_object, [ctypes.c_char_p, ctypes.c_ssize_t]
        return make(None, size)
    except (AttributeError, OSError):
        return mmap.mmap(-1, size)
