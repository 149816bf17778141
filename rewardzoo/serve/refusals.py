"""A refused or failed request as the server answers it: ``{"error": {"kind", "message", "limit"}}`` with its status.

:class:`Refusal` is what the server's own checks raise; :data:`REFUSALS` says what every other error a request
can meet becomes (the app's exception handlers, :func:`exception_handlers`). The answer takes the request's
format on the route that speaks both (``/v1/score``), JSON elsewhere or when the request's format is not valid.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Scope

from ..errors import InputError, RewardZooError
from ..transport.wire import JSON, MSGPACK, WireError, dumps, error_payload, format_of
from .batching import Overloaded
from .memory import DecodeBusy

#: The one route whose answers (errors included) take the request's format, MessagePack or JSON.
BOTH_FORMATS = "/v1/score"


class Refusal(Exception):
    """An answer other than 200: ``status``, ``kind`` (a short word the metrics count), ``message``, the
    ``limit`` it names (or None) and extra ``headers`` (Retry-After, WWW-Authenticate)."""

    def __init__(
        self, status: int, kind: str, message: str, *, limit: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        self.status, self.kind, self.message, self.limit, self.headers = status, kind, message, limit, headers or {}
        super().__init__(message)

    def response(self, fmt: str) -> Response:
        return Response(
            dumps(error_payload(self.kind, self.message, self.limit), fmt),
            status_code=self.status,
            headers=self.headers,
            media_type=MSGPACK if fmt == "msgpack" else JSON,
        )


def _busy(exc: Overloaded | DecodeBusy, limit: str) -> Refusal:
    retry_after = str(max(1, round(exc.retry_after)))
    return Refusal(503, "overloaded", str(exc), limit=limit, headers={"Retry-After": retry_after})


#: What each error becomes; the handler of the nearest class in an error's MRO answers it (a WireError is an
#: InputError, an InputError a RewardZooError). Anything else is a bug: :func:`internal`.
REFUSALS: dict[type[BaseException], Callable[[Any], Refusal]] = {
    Refusal: lambda exc: exc,
    WireError: lambda exc: Refusal(exc.status, exc.kind, str(exc), limit=exc.limit),
    Overloaded: lambda exc: _busy(exc, "max_queue"),
    DecodeBusy: lambda exc: _busy(exc, "max_decoded_bytes"),
    # the client went away (or its body timed out): nobody reads the answer, the metrics count it
    ClientDisconnect: lambda exc: Refusal(499, "disconnected", "the client disconnected"),
    InputError: lambda exc: Refusal(422, "input", str(exc)),
    RewardZooError: lambda exc: Refusal(500, "execution", str(exc)),
}


def internal(exc: BaseException) -> Refusal:
    """A bug's answer: say what failed and keep serving."""
    return Refusal(500, "internal", f"{type(exc).__name__}: {exc}")


def answer_format(scope: Scope) -> str:
    if scope.get("path") != BOTH_FORMATS:
        return "json"
    try:
        fmt = format_of(Headers(scope=scope).get("content-type"))
    except WireError:
        return "json"
    return "msgpack" if fmt == "frames" else fmt  # a framed request is answered in MessagePack


def answer(scope: Scope, refusal: Refusal) -> Response:
    """The refusal's response; its kind kept in the request's state for the metrics."""
    scope.setdefault("state", {})["error"] = refusal.kind
    return refusal.response(answer_format(scope))


def exception_handlers() -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    """Starlette's ``exception_handlers``, one per class of :data:`REFUSALS`."""

    def handler(convert: Callable[[Any], Refusal]) -> Callable[[Request, Exception], Awaitable[Response]]:
        async def handle(request: Request, exc: Exception) -> Response:
            return answer(request.scope, convert(exc))

        return handle

    return {cls: handler(convert) for cls, convert in REFUSALS.items()}
