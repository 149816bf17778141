"""Submit / collect: score requests answered by a ticket at once, their scores collected later.

- ``POST /v1/jobs`` takes what ``POST /v1/score`` takes (same checks: token, format, readiness, admission) and
  answers ``202 {"id", "status": "pending", "expires_after_s"}`` at once; the request is then scored in the
  background by the score route itself (so it meets the same limits, memory budget and batcher);
- ``GET /v1/jobs/{id}`` answers ``202 {"status": "pending"}`` while it runs, then what ``POST /v1/score`` would
  have answered: the scores (200, in the format the job was sent in) or its error (its status and error map, with
  the header ``X-Rewardzoo-Job: failed``). ``?wait=S`` long-polls: the answer comes as soon as the job finishes,
  or after ``S`` seconds (at most :data:`MAX_WAIT_S`) with 202;
- ``DELETE /v1/jobs/{id}`` forgets a ticket (its result's memory freed); 204.

Tickets belong to the bearer token that opened them (a hash of the ``Authorization`` header; no header is one
anonymous owner): a ticket that does not exist, has expired or belongs to another token is a 404, the same answer
in each case, so that nothing tells one client about another's tickets; ids are random (128 bits). A ticket
lives on the server, not on a connection: a client that reconnects (another process, too) collects it by its id.
A finished ticket is kept ``job_ttl_s`` seconds, then forgotten; a pending one is kept until it finishes. Each
token holds at most ``max_jobs_per_token`` tickets (pending or finished, not yet collected and deleted or expired)
and the server ``max_jobs`` in all: past either a submission gets 429 with Retry-After.

Memory: a job holds, while it is scored, what the score route holds (its reservation of the memory budget,
:mod:`~rewardzoo.serve.memory`), and in addition its received body from the submission on (the body outlives the
submission's answer, so it is counted in the budget instead of the reception budget: a submission with no room
gets 503 or 413 at once). A finished job's answer is counted in the budget until its ticket is deleted or expires;
a job whose answer finds no room within the budget's wait fails with 503 (its scores dropped). Nothing a client
sends makes the server hold more than the budget.

A job's own time is not bounded here: an entry's ``timeout_s`` bounds its reward calls
(:mod:`rewardzoo.core.deadlines`), and the client's wait is the client's. Jobs are not counted as requests in
flight (``max_connections``) once their ticket is answered, and a server that stops forgets its tickets.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..transport.wire import JSON
from .memory import MemoryBudget
from .refusals import REFUSALS, Refusal, internal

__all__ = ["MAX_WAIT_S", "Job", "Jobs", "collect", "forget", "submit"]

#: The longest a ``GET /v1/jobs/{id}?wait=S`` holds its connection (a longer ``wait`` is cut to it).
MAX_WAIT_S = 60.0
#: The header of a finished job's error answer (its status is the error's own).
FAILED_HEADER = "X-Rewardzoo-Job"


@dataclass
class Job:
    """One ticket: its ``owner`` (hash of the bearer token), the answer once finished (``status``, ``body``,
    ``media_type``, ``headers``) and the bytes it holds of the memory budget (``held``)."""

    id: str
    owner: str
    created: float
    done: asyncio.Event = field(default_factory=asyncio.Event)
    status: int = 202
    body: bytes = b""
    media_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    held: int = 0
    finished: float | None = None
    task: asyncio.Task[None] | None = None


class Jobs:
    """The server's tickets (see the module docstring); used from the server's event loop only."""

    def __init__(
        self, memory: MemoryBudget, *, ttl_s: float = 600.0, max_per_token: int = 64, max_jobs: int = 1024
    ) -> None:
        self.memory, self.ttl_s, self.max_per_token, self.max_jobs = memory, ttl_s, max_per_token, max_jobs
        self._jobs: dict[str, Job] = {}
        self.expired = 0

    def __len__(self) -> int:
        return len(self._jobs)

    def open(self, owner: str) -> Job:
        """A new pending ticket of ``owner``; 429 past ``max_per_token`` (of the owner) or ``max_jobs`` (in all)."""
        self.purge()
        mine = sum(1 for job in self._jobs.values() if job.owner == owner)
        if mine >= self.max_per_token or len(self._jobs) >= self.max_jobs:
            limit, count = ("max_jobs_per_token", mine) if mine >= self.max_per_token else ("max_jobs", len(self._jobs))
            raise Refusal(
                429,
                "too_many_jobs",
                f"{count} tickets are open ({limit}={getattr(self, _SETTING[limit])}); collect and delete "
                f"finished ones (DELETE /v1/jobs/ID) or wait for them to expire (job_ttl_s={self.ttl_s:g})",
                limit=limit,
                headers={"Retry-After": "1"},
            )
        job = Job(secrets.token_urlsafe(16), owner, time.monotonic())
        self._jobs[job.id] = job
        return job

    def find(self, owner: str, job_id: str) -> Job:
        """``owner``'s ticket ``job_id``; 404 when there is none (never told apart from another owner's)."""
        self.purge()
        job = self._jobs.get(job_id)
        if job is None or not secrets.compare_digest(job.owner, owner):
            raise Refusal(404, "no_such_job", "no such job: it does not exist, has expired or is not this token's")
        return job

    def finish(self, job: Job, status: int, body: bytes, media_type: str, headers: dict[str, str], held: int) -> None:
        job.status, job.body, job.media_type, job.headers, job.held = status, body, media_type, headers, held
        job.finished = time.monotonic()
        job.done.set()
        if job.id not in self._jobs:  # deleted (or the server forgot it) while it ran
            self._free(job)

    def forget(self, job: Job) -> None:
        """Drop a ticket: a pending job's task is cancelled, a finished one's answer freed."""
        self._jobs.pop(job.id, None)
        if job.task is not None and not job.task.done():
            job.task.cancel()
        self._free(job)

    def purge(self, now: float | None = None) -> None:
        """Forget the finished tickets older than ``ttl_s``."""
        now = time.monotonic() if now is None else now
        for job in [j for j in self._jobs.values() if j.finished is not None and now - j.finished > self.ttl_s]:
            self.expired += 1
            self.forget(job)

    def close(self) -> None:
        for job in list(self._jobs.values()):
            self.forget(job)

    def _free(self, job: Job) -> None:
        if job.held:
            self.memory.give_back(job.held)
            job.held = 0
        job.body = b""


_SETTING = {"max_jobs_per_token": "max_per_token", "max_jobs": "max_jobs"}


def owner_of(request: Request) -> str:
    """The owner of the request's tickets: a hash of its ``Authorization`` header ("" without one)."""
    given = request.headers.get("authorization")
    return "" if given is None else hashlib.sha256(given.strip().encode()).hexdigest()


def refusal_of(exc: BaseException) -> Refusal:
    """The answer an error of the score route gets (the app's exception handlers' mapping)."""
    for cls in type(exc).__mro__:
        convert = REFUSALS.get(cls)
        if convert is not None:
            return convert(exc)
    return internal(exc)


def submit(score: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """The ``POST /v1/jobs`` handler over the score route's handler ``score`` (run in the background)."""

    async def handler(request: Request) -> Response:
        state = request.app.state
        jobs: Jobs = state.jobs
        job = jobs.open(owner_of(request))
        try:
            body = request.state.body
            size = len(body.data)
            await jobs.memory.keep(size, "the job's body")  # it outlives this answer: counted in the budget
        except BaseException:
            jobs.forget(job)
            raise
        job.task = asyncio.get_running_loop().create_task(_run(score, request, job, size))
        return JSONResponse({"id": job.id, "status": "pending", "expires_after_s": jobs.ttl_s}, status_code=202)

    return handler


async def _run(score: Callable[[Request], Any], request: Request, job: Job, body_bytes: int) -> None:
    jobs: Jobs = request.app.state.jobs
    try:
        try:
            with request.app.state.batcher.arrival() as arrival:  # on its way to the batcher until submitted
                request.state.arrival = arrival
                response: Response = await score(request)
        finally:
            jobs.memory.give_back(body_bytes)
        payload = bytes(response.body)
        await jobs.memory.keep(len(payload), "the job's answer")
        jobs.finish(job, response.status_code, payload, response.media_type or JSON, {}, len(payload))
    except asyncio.CancelledError:
        jobs.finish(job, 410, b"", JSON, {}, 0)
        raise
    except BaseException as exc:  # the job's error is its answer
        refusal = refusal_of(exc)
        fmt = getattr(request.state, "fmt", "json")
        answer = refusal.response(fmt if isinstance(fmt, str) else "json")
        headers = {**refusal.headers, FAILED_HEADER: "failed"}
        jobs.finish(job, refusal.status, bytes(answer.body), answer.media_type or JSON, headers, 0)


async def collect(request: Request) -> Response:
    """``GET /v1/jobs/{id}[?wait=S]``: the job's answer once finished, else 202 (after up to ``S`` seconds)."""
    jobs: Jobs = request.app.state.jobs
    job = jobs.find(owner_of(request), request.path_params["job_id"])
    wait = _wait_of(request.query_params.get("wait"))
    if not job.done.is_set() and wait > 0:
        try:
            await asyncio.wait_for(job.done.wait(), wait)
        except asyncio.TimeoutError:
            pass
    if not job.done.is_set():
        return JSONResponse({"id": job.id, "status": "pending"}, status_code=202, headers={"Retry-After": "1"})
    return Response(job.body, status_code=job.status, media_type=job.media_type, headers=job.headers)


async def forget(request: Request) -> Response:
    """``DELETE /v1/jobs/{id}``: the ticket forgotten (a running job cancelled); 204."""
    jobs: Jobs = request.app.state.jobs
    jobs.forget(jobs.find(owner_of(request), request.path_params["job_id"]))
    return Response(status_code=204)


def _wait_of(text: str | None) -> float:
    if text is None:
        return 0.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise Refusal(400, "input", f"wait must be a number of seconds >= 0, got {text!r}", limit=None)
    return min(seconds, MAX_WAIT_S)
