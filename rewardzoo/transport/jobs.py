"""Submit / collect over the wire (:mod:`rewardzoo.serve.jobs` is the server side): post samples to
``POST /v1/jobs`` and collect the answers by long-polling ``GET /v1/jobs/{id}?wait=S``.

A submission is split into requests of at most the server's ``max_samples`` (groups whole, as
:meth:`ServedRewards.score <rewardzoo.transport.served.ServedRewards.score>` splits them) and returns once the server
has answered each with a ticket. Collecting long-polls each ticket: the answer comes as soon as the job finishes, and a
broken connection is opened again (the ticket lives on the server, so the samples are never sent or scored twice, and
a client in another process can collect it by its ids). Once collected, a ticket is deleted on the server (its
answer's memory freed). :class:`~rewardzoo.serve.client.RewardClient` ``submit`` / ``collect`` and the ``remote``
reward's ``submit: true`` use it.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ..errors import HttpError, InputError
from .http import HttpClient, RetryPolicy
from .served import ServedRewards, concat_results, in_order, request_chunks, score_answer
from .wire import content_type, encode_request

__all__ = ["JobFuture", "JobTickets"]


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

    def collect(
        self, tickets: Sequence[str], positions: Sequence[Sequence[int]], timeout: float | None, *, delete: bool = True
    ) -> dict:
        """The tickets' combined answer, in the order of the positions (waiting up to ``timeout`` seconds; None:
        ``give_up_s``); with ``delete``, the tickets are deleted once collected."""
        deadline = time.monotonic() + (self.give_up_s if timeout is None else timeout)
        answers = [self._one(ticket, len(chunk), deadline) for ticket, chunk in zip(tickets, positions)]
        result = in_order(concat_results(answers), [i for chunk in positions for i in chunk])
        if delete:
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
            result = self.collect(future.tickets, future.positions, None, delete=False)
        except BaseException as exc:
            future.set_exception(exc)
            return
        future.set_result(result)
        for ticket in future.tickets:  # after the result: the caller does not wait for the server to forget it
            self.delete(ticket)

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
            return score_answer(response, count, self.server.fmt)
