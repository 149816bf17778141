"""The client side of submit / collect (:mod:`rewardzoo.serve.jobs`): :meth:`RewardClient.submit
<rewardzoo.serve.client.RewardClient.submit>` and ``collect``.

A submission posts the samples to ``POST /v1/jobs`` (in requests of at most the server's ``max_samples``, groups
whole, as ``score`` does; retried on connection errors, 429 and 503 with backoff) and returns once the server has
answered each with a ticket. The scores are collected on the client's collector threads by long-polling
``GET /v1/jobs/{id}?wait=S``: the answer comes as soon as the job finishes, and a broken connection is opened again
(the ticket lives on the server, so a client in another process can collect it by its ids). Once collected, the
ticket is deleted on the server (its answer's memory freed).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from ..errors import HttpError, InputError, RewardZooError
from ..transport.http import HttpClient, RetryPolicy
from ..transport.served import ServedRewards, concat_results, in_order, request_chunks
from ..transport.wire import JSON, MSGPACK, WireLimits, content_type, decode_result, encode_request, loads

__all__ = ["JobFuture", "JobTickets"]

#: An answer's size is the server's business (it is bounded by the request we sent).
_ANSWERS = WireLimits(max_request_bytes=None)


class JobFuture(cf.Future):
    """A :class:`concurrent.futures.Future` of a :class:`~rewardzoo.RewardResult`; ``tickets`` are the server's
    ids of its requests (with ``positions``, the samples of each), enough to collect it from another client."""

    def __init__(self, tickets: list[str], positions: list[list[int]]) -> None:
        super().__init__()
        self.tickets, self.positions = tickets, positions


class JobTickets:
    """Posting and collecting jobs on ``server`` (a :class:`~rewardzoo.transport.served.ServedRewards`);
    ``headers``: the bearer token's; ``wait_s``: one long poll; ``give_up_s``: how long a ticket is collected
    through broken connections before the future fails; ``threads``: collector threads."""

    def __init__(
        self,
        server: ServedRewards,
        headers: Mapping[str, str],
        *,
        wait_s: float = 30.0,
        give_up_s: float = 600.0,
        threads: int = 8,
    ) -> None:
        self.server, self.wait_s, self.give_up_s = server, wait_s, give_up_s
        # one try per poll: this loop decides what to do with a broken connection or a pending answer
        self.polls = HttpClient(
            server.url,
            policy=RetryPolicy(attempts=1, timeout_s=wait_s + 30.0),
            headers=headers,
            max_concurrency=threads,
            label=f"rewardzoo server {server.url}",
        )
        self._pool = cf.ThreadPoolExecutor(threads, thread_name_prefix="rewardzoo-collect")

    def post(self, samples: Sequence[Mapping[str, Any]], rewards: Sequence[str] | None) -> tuple[list[str], list]:
        """Post the samples; their tickets and each ticket's sample positions."""
        tickets, positions = [], []
        fmt = self.server.fmt
        limit = self.server.limits.get("max_request_bytes")
        for chunk in request_chunks(samples, self.server.limits.get("max_samples")):
            try:
                body = encode_request(
                    [samples[i] for i in chunk], rewards, fmt=fmt, image_format=self.server.image_format
                )
            except InputError as exc:
                raise exc.located(indices=chunk) from None
            if limit is not None and len(body) > limit:
                raise InputError(
                    f"a job of {len(chunk)} sample(s) encodes to {len(body)} bytes, over the server's limit "
                    f"max_request_bytes={limit}; submit fewer samples at a time",
                    sample=chunk[0],
                )
            kind = content_type(fmt)
            answer = self.server.http.request("POST", "/v1/jobs", body, headers={"Content-Type": kind, "Accept": kind})
            tickets.append(str(json.loads(answer.body)["id"]))
            positions.append(chunk)
        return tickets, positions

    def start(self, tickets: list[str], positions: list[list[int]]) -> JobFuture:
        """A future of the tickets' combined answer (a decoded score response map), collected in the background."""
        future = JobFuture(tickets, positions)
        self._pool.submit(self._fill, future)
        return future

    def collect(self, tickets: Sequence[str], positions: Sequence[Sequence[int]], timeout: float | None) -> dict:
        """The tickets' combined answer (waiting up to ``timeout`` seconds; None: ``give_up_s``)."""
        deadline = time.monotonic() + (self.give_up_s if timeout is None else timeout)
        answers = [self._one(ticket, len(chunk), deadline) for ticket, chunk in zip(tickets, positions)]
        result = in_order(concat_results(answers), [i for chunk in positions for i in chunk])
        for ticket in tickets:
            self.delete(ticket)
        return result

    def delete(self, ticket: str) -> None:
        """Forget the ticket on the server (best effort: it expires anyway)."""
        try:
            self.polls.request("DELETE", f"/v1/jobs/{quote(ticket, safe='')}", timeout_s=10.0)
        except HttpError:
            pass

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.polls.close()

    def _fill(self, future: JobFuture) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(self.collect(future.tickets, future.positions, None))
        except BaseException as exc:
            future.set_exception(exc)

    def _one(self, ticket: str, count: int, deadline: float) -> dict:
        path = f"/v1/jobs/{quote(ticket, safe='')}"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HttpError(
                    self.server.url + path, status=None, attempts=1, reason="the job did not finish in time"
                )
            wait = min(self.wait_s, max(left, 0.0))
            try:
                response = self.polls.request("GET", f"{path}?wait={wait:.3f}", timeout_s=wait + 30.0)
            except HttpError as exc:
                if exc.status is None:  # the connection broke: the ticket lives on the server, ask again
                    time.sleep(min(0.5, max(left, 0.0)))
                    continue
                raise
            if response.status == 202:
                continue
            kind = response.headers.get("content-type", "")
            fmt = "msgpack" if kind.startswith(MSGPACK) else "json" if kind.startswith(JSON) else self.server.fmt
            try:
                return decode_result(loads(response.body, fmt, replace(_ANSWERS, max_samples=count)))
            except (ValueError, RewardZooError) as exc:
                raise HttpError(
                    response.url,
                    status=response.status,
                    attempts=1,
                    reason=f"the answer is not a score response ({exc})",
                    body=response.body,
                ) from None
