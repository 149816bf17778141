"""The ASGI app of ``rewardzoo serve`` (Starlette): the same app under uvicorn and in a Ray Serve replica.

Endpoints (the wire format is :mod:`rewardzoo.transport.wire`):

- ``POST /v1/score`` — samples in, per-reward vectors, totals, applied lists, weights and extras out;
- ``POST /get_reward`` — OpenRLHF's remote reward model protocol (``{"query", "prompts", "labels"}`` in,
  ``{"rewards", "scores", "extra_logs"}`` out; each query split at its prompt), same auth and limits;
- ``GET /v1/rewards`` — the served rewards with their kind, fields, direction and score range, and the limits;
- ``GET /health`` — the process answers; ``GET /ready`` — 200 once the models are loaded, 503 before and
  while the server drains to stop (``{"ready": false, "draining": true}``; :mod:`~rewardzoo.serve.drain`);
- ``GET /metrics`` — Prometheus text (requests, samples, errors by kind, latency, batch sizes, queue);
- ``POST /v1/jobs``, ``GET|DELETE /v1/jobs/{id}`` — submit / collect (:mod:`~rewardzoo.serve.jobs`).

With a token every endpoint except ``/health`` and ``/ready`` needs ``Authorization: Bearer <token>``
(compared in constant time). Refusals are 4xx with ``{"error": {"kind", "message", "limit"}}``: 400
malformed, 401/403 auth, 413 a limit, 415 a body that is not MessagePack or JSON, 422 a sample the rewards
cannot take; 503 with Retry-After while loading, when the queue is full, when the bodies being received are at
``max_receiving_bytes``, when ``max_in_flight`` score requests are in flight (counted once a body has arrived),
when the memory budget (:mod:`~rewardzoo.serve.memory`) has no room within its wait, or while draining; 500 when a
reward fails. ``/health`` and ``/ready`` are never refused for load.

A score request's memory is admitted before it is held: its body's parse from the body's size, then its media's
decoding and conversion from their headers (every limit checked by a dry decode first), and released once answered.

The checks are middleware (:mod:`~rewardzoo.serve.middleware`), listed per route below; the refusals and
errors are answered by exception handlers (:mod:`~rewardzoo.serve.refusals`); the handlers only score.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..errors import InputError
from ..spec.sample import Sample, samples_of
from ..transport.frames import client_is_local, loads_frames, wire_listing
from ..transport.wire import (
    JSON,
    MSGPACK,
    WireError,
    WireLimits,
    decode_request_map,
    decoded_bytes,
    dumps,
    loads,
    parse_bytes,
)
from . import jobs
from .batching import Batcher
from .drain import Drain
from .memory import ConversionCost, MemoryBudget, Reservation
from .metrics import Metrics
from .middleware import (
    Admitted,
    Arriving,
    Authenticated,
    BodyLimit,
    Counted,
    Ready,
    Received,
    ReceivedBody,
    ReceptionBudget,
    WireFormat,
)
from .options import ServeOptions
from .refusals import exception_handlers
from .service import RewardService, openrlhf_answer, openrlhf_samples

log = logging.getLogger("rewardzoo.serve")
#: The endpoints counted in the metrics (requests by status, errors by kind; latency for /v1/score).
COUNTED = ("/v1/score", "/get_reward", "/v1/rewards")


def build_app(
    service: RewardService,
    options: ServeOptions = ServeOptions(),
    *,
    on_load_error: Callable[[BaseException], None] | None = None,
    drain: Drain | None = None,
) -> Starlette:
    """The app over ``service``. When the service is not loaded yet, it is loaded on a thread at startup
    (``/ready`` answers 503 meanwhile); ``on_load_error`` is called if that fails. ``drain``: the server's stop
    (its own by default, ``app.state.drain``), begun by whoever runs the app; it also counts the score requests
    in flight."""
    metrics, drain = Metrics(), drain or Drain()
    batcher = Batcher(
        service.score,
        max_batch=options.max_batch,
        max_wait_s=options.max_wait_ms / 1000,
        max_queue=options.max_queue,
        metrics=metrics,
    )
    metrics.ready = int(service.ready)
    authenticated = [Middleware(Authenticated, token=options.token)] if options.token is not None else []
    ready = [Middleware(Ready, service=service)]
    reception = ReceptionBudget(options.max_receiving_bytes)
    admitted = [  # the body first, whole: a slow sender holds no in-flight place
        Middleware(Arriving, batcher=batcher),
        Middleware(BodyLimit, limits=service.limits),
        Middleware(Received, budget=reception),
        Middleware(Admitted, drain=drain, max_in_flight=options.max_in_flight),
    ]
    routes = [
        Route("/health", health),
        Route("/ready", ready_state),
        Route("/v1/rewards", rewards, middleware=[*authenticated, *ready]),
        Route(
            "/v1/score", score, methods=["POST"], middleware=[*authenticated, Middleware(WireFormat), *ready, *admitted]
        ),
        Route("/get_reward", get_reward, methods=["POST"], middleware=[*authenticated, *ready, *admitted]),
        Route("/metrics", metrics_text, middleware=authenticated),
        # submit / collect (rewardzoo.serve.jobs): a job is the score route's request, answered later
        Route(
            "/v1/jobs",
            jobs.submit(score),
            methods=["POST"],
            middleware=[*authenticated, Middleware(WireFormat), *ready, *admitted],
        ),
        Route("/v1/jobs/{job_id}", jobs.collect, methods=["GET"], middleware=authenticated),
        Route("/v1/jobs/{job_id}", jobs.forget, methods=["DELETE"], middleware=authenticated),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Counted, metrics=metrics, endpoints=COUNTED)],
        exception_handlers=exception_handlers(),
        lifespan=_lifespan,
    )
    app.state.service, app.state.metrics, app.state.batcher, app.state.drain = service, metrics, batcher, drain
    app.state.memory, app.state.reception, app.state.decoders = (
        MemoryBudget(options.max_decoded_bytes, options.decode_wait_s),
        reception,
        Decoders(options.decode_threads),
    )
    app.state.jobs = jobs.Jobs(
        app.state.memory, ttl_s=options.job_ttl_s, max_per_token=options.max_jobs_per_token, max_jobs=options.max_jobs
    )
    app.state.on_load_error = on_load_error
    app.state.shm = options.shm
    app.state.conversion = None  # what converting media to the served rewards' forms costs, once they are loaded
    return app


class Decoders:
    """Parsing and decoding run on at most ``threads`` threads (their limiter made on the loop, at first use)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._limiter: Any = None

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        import anyio

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.threads)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok", "protocol": 1})


async def ready_state(request: Request) -> Response:
    service: RewardService = request.app.state.service
    if request.app.state.drain.draining:
        return JSONResponse({"ready": False, "draining": True}, status_code=503)
    if service.ready:
        return JSONResponse({"ready": True})
    error = str(service.load_error) if service.load_error else None
    return JSONResponse({"ready": False, "error": error}, status_code=503, headers={"Retry-After": "2"})


async def rewards(request: Request) -> Response:
    return JSONResponse({**request.app.state.service.reward_list(), "wire": wire_listing(request.app.state.shm)})


async def metrics_text(request: Request) -> Response:
    return PlainTextResponse(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4")


async def score(request: Request) -> Response:
    state, fmt = request.app.state, request.state.fmt
    limits = state.service.limits
    async with state.memory.reserve() as held:
        data = await _parsed(request, held, fmt)
        await state.decoders.run(_check, state.service, data, limits)  # every limit, from the headers
        await held.grow(decoded_bytes(data, limits) + _conversion(state).bytes(data), "the request's media")
        threads = min(state.decoders.threads, os.cpu_count() or 1)  # a request's PNGs decoded on these threads
        key, samples = await state.decoders.run(_decode, state.service, data, limits, threads)
        del data
        try:
            answer = await state.batcher.submit(key, samples, getattr(request.state, "arrival", None))
            request.state.samples = len(samples)
        finally:
            samples.clear()  # its media freed now, although the batcher may keep its last batch while idle
    fmt = "msgpack" if fmt == "frames" else fmt  # a framed request is answered in MessagePack
    # the body's buffer is freed on a worker thread while the answer goes out: unmapping 25 MB costs ~5 ms, which
    # then delays neither this answer nor the next request on the event loop
    buffer = [request.scope.get("state", {}).pop("buffer", None)]
    if buffer[0] is not None:
        asyncio.get_running_loop().run_in_executor(None, buffer.clear)
    del buffer
    return Response(dumps(answer, fmt), media_type=MSGPACK if fmt == "msgpack" else JSON)


async def _parsed(request: Request, held: Reservation, fmt: str) -> Any:
    """The request's body parsed, once the memory budget (``held``) has room for the body and what
    parsing it builds; from then the body counts there, not in the reception budget, and is dropped once parsed."""
    state, body = request.app.state, request.state.body
    if not isinstance(body, ReceivedBody):  # the route's Received middleware reads it
        raise TypeError("the request body was not received by the Received middleware")
    await held.grow(parse_bytes(len(body.data), fmt, state.service.limits), "the request's body")
    body.release()
    if fmt == "frames":  # large buffers as views of the body (or of a local client's shared memory)
        why_not = "it was started without shared memory" if not state.shm else None
        why_not = why_not or client_is_local(request.scope.get("client"), request.headers)
        buffer = request.state.buffer = body.take()  # held to the answer (see score), not just by the views
        return await state.decoders.run(partial(loads_frames, buffer, state.service.limits, shm_allowed=why_not))
    return await state.decoders.run(loads, body.take(), fmt, state.service.limits)


def _conversion(state: Any) -> ConversionCost:
    """The served rewards' conversion cost (:class:`ConversionCost`), computed at the first score request (the
    ``Ready`` middleware lets none through before the rewards are loaded)."""
    if state.conversion is None:
        state.conversion = ConversionCost.of(state.service.processor(state.service.names).rewards.values())
    return state.conversion


async def get_reward(request: Request) -> Response:
    """OpenRLHF's remote reward model protocol (``--reward.remote_url``), see ``service.openrlhf_samples``."""
    state = request.app.state
    async with state.memory.reserve() as held:
        data = await _parsed(request, held, "json")
        samples = await state.decoders.run(openrlhf_samples, data, state.service.limits)
        del data
        try:
            arrival = getattr(request.state, "arrival", None)
            answer = openrlhf_answer(await state.batcher.submit(state.service.names, samples, arrival))
            request.state.samples = len(samples)
        finally:
            samples.clear()
    return Response(dumps(answer, "json"), media_type=JSON)


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    if not app.state.service.ready:
        threading.Thread(target=_load, args=(app,), name="rewardzoo-serve-load", daemon=True).start()
    yield
    app.state.batcher.close()


def _load(app: Starlette) -> None:
    service: RewardService = app.state.service
    try:
        service.load()
        app.state.metrics.ready = 1
        log.info("rewardzoo serve: ready (%s)", ", ".join(service.names))
    except BaseException as exc:
        log.error("rewardzoo serve: loading the rewards failed: %s", exc)
        if app.state.on_load_error is not None:
            app.state.on_load_error(exc)


def _check(service: RewardService, data: object, limits: WireLimits) -> None:
    """Every limit decoding would check, from the PNG headers and raw shapes alone (nothing decoded)."""
    service.key(decode_request_map(data, limits, dry=True).rewards)


def _decode(
    service: RewardService, data: object, limits: WireLimits, threads: int = 1
) -> tuple[tuple[str, ...], list[Sample]]:
    request = decode_request_map(data, limits, threads=threads)  # PNGs decoded on the threads in parallel
    key = service.key(request.rewards)
    try:
        return key, samples_of(request.samples)
    except InputError as exc:
        raise WireError(exc.message, field=exc.field, sample=exc.sample, kind="input", status=422) from None
