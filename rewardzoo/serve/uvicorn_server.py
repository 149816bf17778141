"""uvicorn for ``rewardzoo serve``: :class:`DrainingServer`, which stops on SIGTERM by draining (see
:mod:`~rewardzoo.serve.drain`). Imports uvicorn; only :func:`~rewardzoo.serve.server.serve_command` imports it."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from types import FrameType

import uvicorn

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


def guarded_protocol(header_timeout_s: float, body_timeout_s: float, max_header_bytes: int = 64 * 1024) -> type:
    """uvicorn's HTTP protocol (httptools, or h11 without it) with the read deadlines uvicorn lacks.

    A connection that has begun a request must deliver its headers within ``header_timeout_s`` (and at most
    ``max_header_bytes`` of them), and its body within ``body_timeout_s`` of the headers; past either it gets
    408 (431 for headers too large) and is closed. A connection that sends nothing is closed after uvicorn's
    ``timeout_keep_alive`` (the idle timeout), on its first request as after a response. While the app works on a
    request nothing is timed (the model's time is the client's timeout to set).
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT

    class GuardedProtocol(AutoHTTPProtocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._phase, self._header_bytes = "idle", 0
            self._timer: asyncio.TimerHandle | None = None
            self._arm(self.timeout_keep_alive, 0, "")  # silent from the start: the idle timeout

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

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
                        "error": {"kind": "timeout" if status == 408 else "limit", "message": message, "limit": None},
                    }
                ).encode()
                reason = {408: "Request Timeout", 431: "Request Header Fields Too Large"}[status]
                self.transport.write(
                    f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
                    f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
            log.info("rewardzoo serve: closed a connection: %s", message or "idle")
            self.transport.close()

    return GuardedProtocol
