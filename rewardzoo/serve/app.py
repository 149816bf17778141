"""The ASGI app of ``rewardzoo serve`` (Starlette): the same app under uvicorn and in a Ray Serve replica.

Endpoints (the wire format is :mod:`rewardzoo.transport.wire`):

- ``POST /v1/score`` — samples in, per-reward vectors, totals, applied lists, weights and extras out;
- ``POST /get_reward`` — OpenRLHF's remote reward model protocol (``{"query", "prompts", "labels"}`` in,
  ``{"rewards", "scores", "extra_logs"}`` out; each query split at its prompt), same auth and limits;
- ``GET /v1/rewards`` — the served rewards with their kind, fields, direction and score range, and the limits;
- ``GET /health`` — the process answers; ``GET /ready`` — 200 once the models are loaded, 503 before and
  while the server drains to stop (``{"ready": false, "draining": true}``; :mod:`~rewardzoo.serve.drain`);
- ``GET /metrics`` — Prometheus text (requests, samples, errors by kind, latency, batch sizes, queue).

With a token every endpoint except ``/health`` and ``/ready`` needs ``Authorization: Bearer <token>``
(compared in constant time). Refusals are 4xx with ``{"error": {"kind", "message", "limit"}}``: 400
malformed, 401/403 auth, 413 a limit, 415 a body that is not MessagePack or JSON, 422 a sample the rewards
cannot take; 503 with Retry-After while loading, when the queue is full, when ``max_in_flight`` score requests
are in flight, when the decoded-media budget (:mod:`~rewardzoo.serve.memory`) has no room within its wait, or
while draining; 500 when a reward fails. ``/health`` and ``/ready`` are never refused for load.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..errors import InputError, RewardZooError
from ..spec.sample import Sample, samples_of
from ..transport.wire import (
    JSON,
    MSGPACK,
    WireError,
    WireLimits,
    decode_request_map,
    decoded_bytes,
    dumps,
    error_payload,
    format_of,
    loads,
)
from .batching import Batcher, Overloaded
from .drain import Drain
from .memory import ConversionCost, DecodeBudget, DecodeBusy
from .metrics import Metrics
from .options import ServeOptions
from .service import RewardService, openrlhf_answer, openrlhf_samples

log = logging.getLogger("rewardzoo.serve")
#: A body declared larger than this is refused without reading it (the connection is closed); smaller
#: bodies over the limit are read and discarded so the client sees the 413 instead of a broken pipe.
DRAIN_BYTES = 2**30


class _Refused(Exception):
    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None):
        self.status, self.kind, self.message, self.headers = status, kind, message, headers or {}
        super().__init__(message)


def build_app(
    service: RewardService,
    options: ServeOptions = ServeOptions(),
    *,
    on_load_error: Callable[[BaseException], None] | None = None,
    drain: Drain | None = None,
) -> Starlette:
    """The app over ``service``. When the service is not loaded yet, it is loaded on a thread at startup
    (``/ready`` answers 503 meanwhile); ``on_load_error`` is called if that fails. ``drain``: the server's stop
    (its own by default, ``app.state.drain``), begun by whoever runs the app."""
    metrics = Metrics()
    drain = drain or Drain()
    batcher = Batcher(
        service.score,
        max_batch=options.max_batch,
        max_wait_s=options.max_wait_ms / 1000,
        max_queue=options.max_queue,
        metrics=metrics,
    )
    limits = service.limits
    metrics.ready = int(service.ready)
    budget = DecodeBudget(options.max_decoded_bytes, options.decode_wait_s)
    in_flight = [0]
    costs: list[ConversionCost] = []  # what converting media to the served rewards' forms costs, once loaded

    def conversion() -> ConversionCost:
        if not costs:
            costs.append(ConversionCost.of(service.processor(service.names).rewards.values()))
        return costs[0]

    decoders: list = []  # the thread limiter of parsing and decoding, made on the loop at first use

    async def in_decoder(fn: Callable, *args):
        import anyio

        if not decoders:
            decoders.append(anyio.CapacityLimiter(options.decode_threads))
        return await anyio.to_thread.run_sync(fn, *args, limiter=decoders[0])

    def authorize(request: Request) -> None:
        if options.token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given:
            raise _Refused(
                401, "auth", "this server needs 'Authorization: Bearer <token>'", {"WWW-Authenticate": "Bearer"}
            )
        if not hmac.compare_digest(given.strip().encode(), options.token.encode()):
            raise _Refused(403, "auth", "the bearer token is not valid")

    def require_ready() -> None:
        if not service.ready:
            detail = f" (loading failed: {service.load_error})" if service.load_error else ""
            raise _Refused(503, "not_ready", f"the models are still loading{detail}", {"Retry-After": "2"})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "protocol": 1})

    async def ready(request: Request) -> Response:
        if drain.draining:
            return JSONResponse({"ready": False, "draining": True}, status_code=503)
        if service.ready:
            return JSONResponse({"ready": True})
        return JSONResponse(
            {"ready": False, "error": str(service.load_error) if service.load_error else None},
            status_code=503,
            headers={"Retry-After": "2"},
        )

    async def rewards(request: Request) -> Response:
        started = time.monotonic()
        try:
            authorize(request)
            require_ready()
        except _Refused as exc:
            metrics.request("/v1/rewards", exc.status, time.monotonic() - started, error=exc.kind)
            return _error_response(exc.status, exc.kind, exc.message, None, "json", exc.headers)
        metrics.request("/v1/rewards", 200, time.monotonic() - started)
        return JSONResponse(service.reward_list())

    async def metrics_text(request: Request) -> Response:
        try:
            authorize(request)
        except _Refused as exc:
            return _error_response(exc.status, exc.kind, exc.message, None, "json", exc.headers)
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    @contextlib.asynccontextmanager
    async def admitted() -> AsyncIterator[None]:
        """A score request's place: refused (503) past ``max_in_flight`` or while draining."""
        if in_flight[0] >= options.max_in_flight:
            raise _Refused(
                503,
                "overloaded",
                f"the server has {in_flight[0]} score requests in flight (its "
                f"limit max_in_flight={options.max_in_flight}); retry later",
                {"Retry-After": "1"},
            )
        if not drain.enter():
            raise _Refused(
                503, "draining", "this server is stopping; send the request to another one", {"Retry-After": "1"}
            )
        in_flight[0] += 1
        try:
            yield
        finally:
            in_flight[0] -= 1
            drain.leave()

    def refusal(route: str, exc: Exception, started: float, fmt: str) -> Response:
        """The error answer of a score route: its status, kind and limit, counted in the metrics."""
        limit: str | None = None
        headers: dict[str, str] = {}
        if isinstance(exc, WireError):
            status, kind, message, limit = exc.status, exc.kind, str(exc), exc.limit
        elif isinstance(exc, _Refused):
            status, kind, message, headers = exc.status, exc.kind, exc.message, exc.headers
        elif isinstance(exc, (Overloaded, DecodeBusy)):
            status, kind, message = 503, "overloaded", str(exc)
            limit = "max_queue" if isinstance(exc, Overloaded) else "max_decoded_bytes"
            headers = {"Retry-After": str(max(1, round(exc.retry_after)))}
        elif isinstance(exc, ClientDisconnect):  # the client went away (or its body timed out): nobody to answer
            status, kind, message = 499, "disconnected", "the client disconnected"
        elif isinstance(exc, InputError):
            status, kind, message = 422, "input", str(exc)
        elif isinstance(exc, RewardZooError):
            status, kind, message = 500, "execution", str(exc)
        else:  # a bug: keep serving, say what failed, log the traceback
            log.error("%s request failed", route, exc_info=exc)
            status, kind, message = 500, "internal", f"{type(exc).__name__}: {exc}"
        metrics.request(route, status, time.monotonic() - started, error=kind)
        return _error_response(status, kind, message, limit, fmt, headers)

    async def score(request: Request) -> Response:
        started, n = time.monotonic(), 0
        try:  # answer in the request's format whenever it has a valid one, errors included
            fmt, unsupported = format_of(request.headers.get("content-type")), None
        except WireError as exc:
            fmt, unsupported = "json", exc
        try:
            authorize(request)
            if unsupported is not None:
                raise unsupported
            require_ready()
            async with admitted():
                body = await _read_body(request, limits)
                data = await in_decoder(loads, body, fmt, limits)
                del body
                async with budget.hold(decoded_bytes(data, limits) + conversion().bytes(data)):
                    key, samples = await in_decoder(_decode, service, data, limits)
                    del data
                    n = len(samples)
                    answer = await batcher.submit(key, samples)
                    del samples
            metrics.request("/v1/score", 200, time.monotonic() - started, samples=n)
            return Response(dumps(answer, fmt), media_type=MSGPACK if fmt == "msgpack" else JSON)
        except Exception as exc:
            return refusal("/v1/score", exc, started, fmt)

    async def get_reward(request: Request) -> Response:
        """OpenRLHF's remote reward model protocol (``--reward.remote_url``), see ``service.openrlhf_samples``."""
        started, n = time.monotonic(), 0
        try:
            authorize(request)
            require_ready()
            async with admitted():
                body = await _read_body(request, limits)
                samples = await in_decoder(lambda: openrlhf_samples(loads(body, "json", limits), limits))
                n = len(samples)
                answer = openrlhf_answer(await batcher.submit(service.names, samples))
            metrics.request("/get_reward", 200, time.monotonic() - started, samples=n)
            return Response(dumps(answer, "json"), media_type=JSON)
        except Exception as exc:
            return refusal("/get_reward", exc, started, "json")

    def load() -> None:
        try:
            service.load()
            metrics.ready = 1
            log.info("rewardzoo serve: ready (%s)", ", ".join(service.names))
        except BaseException as exc:
            log.error("rewardzoo serve: loading the rewards failed: %s", exc)
            if on_load_error is not None:
                on_load_error(exc)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if not service.ready:
            threading.Thread(target=load, name="rewardzoo-serve-load", daemon=True).start()
        yield
        batcher.close()

    routes = [
        Route("/health", health),
        Route("/ready", ready),
        Route("/v1/rewards", rewards),
        Route("/v1/score", score, methods=["POST"]),
        Route("/get_reward", get_reward, methods=["POST"]),
        Route("/metrics", metrics_text),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.service, app.state.metrics, app.state.batcher, app.state.drain = service, metrics, batcher, drain
    app.state.decode_budget = budget
    return app


async def _read_body(request: Request, limits: WireLimits) -> bytes:
    """The body, refused (413, naming max_request_bytes) once it is over the limit; see :data:`DRAIN_BYTES`."""
    limit = limits.max_request_bytes
    declared = request.headers.get("content-length")
    if declared is not None and not declared.strip().isdigit():
        raise WireError("the Content-Length header is not a number")
    if limit is not None and declared is not None and int(declared) > DRAIN_BYTES:
        limits.over("max_request_bytes", int(declared), f"the request body ({declared} bytes, from Content-Length)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if limit is None or size <= limit:
            chunks.append(chunk)
        elif chunks:
            chunks = []  # over the limit: keep reading so the client gets the answer, but keep nothing
    if limit is not None:
        limits.over("max_request_bytes", size, f"the request body ({size} bytes)")
    return b"".join(chunks)


def _decode(service: RewardService, data: object, limits: WireLimits) -> tuple[tuple[str, ...], list[Sample]]:
    request = decode_request_map(data, limits)
    key = service.key(request.rewards)
    try:
        return key, samples_of(request.samples)
    except InputError as exc:
        raise WireError(exc.message, field=exc.field, sample=exc.sample, kind="input", status=422) from None


def _error_response(
    status: int, kind: str, message: str, limit: str | None, fmt: str, headers: dict[str, str] | None = None
) -> Response:
    payload = error_payload(kind, message, limit)
    return Response(
        dumps(payload, fmt), status_code=status, headers=headers or {}, media_type=MSGPACK if fmt == "msgpack" else JSON
    )
