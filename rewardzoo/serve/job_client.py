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
from dataclasses import fields as dataclass_fields
from typing import Any
from urllib.parse import quote

from ..core.engine import RewardResult, as_samples
from ..errors import HttpError, InputError
from ..shared.groups import group_key
from ..shared.options import positive_float, positive_int
from ..transport.http import HttpClient, RetryPolicy
from ..transport.served import ServedRewards, concat_results, in_order, request_chunks, score_answer
from ..transport.wire import content_type, encode_request

__all__ = ["JobFuture", "JobRunner", "JobTickets"]

#: An answer's size is the server's business (it is bounded by the request we sent).


def result_of(out: Mapping[str, Any], group_ids: list[Any]) -> RewardResult:
    """A decoded score response map as a :class:`~rewardzoo.RewardResult`."""
    return RewardResult(
        rewards=out["rewards"],
        total=out["total"],
        applied=out["applied"],
        extras=out["extras"],
        weights=out["weights"],
        group_ids=group_ids,
    )


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


class JobRunner:
    """:class:`~rewardzoo.core.async_runner.AsyncRewardRunner`'s ``add`` / ``finalize`` against a server, through
    submit / collect (``client.incremental()``): each ``add`` submits its samples at once (``POST /v1/jobs``), so
    the server scores them while the trainer generates the next batch, on another machine; ``finalize`` collects
    the round's tickets and returns the :class:`~rewardzoo.RewardResult` that ``client.score(all samples)`` gives.

    Groups stay whole: when the server serves a groupwise reward, the samples with a ``group_id`` wait until their
    group has ``group_size`` members (when given) or until ``finalize``, and then travel in one request.
    ``rewards``: the served rewards to score with (None: all); ``timeout``: seconds ``finalize`` may wait.
    """

    def __init__(
        self,
        client: Any,
        *,
        group_size: int | None = None,
        rewards: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> None:
        positive_int(group_size, "group_size", allow_none=True)
        self.timeout = None if timeout is None else positive_float(timeout, "timeout")
        self.client, self.group_size, self.rewards = client, group_size, rewards
        served = client.rewards
        self._groupwise = any(row["kind"] == "groupwise" for row in served if rewards is None or row["name"] in rewards)
        self._reset()

    def _reset(self) -> None:
        self._samples: list[Any] = []
        self._open: dict[Any, list[int]] = {}
        self._parts: list[tuple[list[str], list[list[int]]]] = []

    @property
    def num_samples(self) -> int:
        """Samples added to the current round."""
        return len(self._samples)

    def add(self, samples: Any) -> range:
        """Append samples to the round and submit those that can be scored now; their indices in the round."""
        start = len(self._samples)
        new = as_samples(samples, start=start)
        self._samples.extend(new)
        due: list[int] = []
        for i, sample in enumerate(new, start):
            if not self._groupwise or sample.group_id is None:
                due.append(i)
                continue
            members = self._open.setdefault(group_key(sample.group_id), [])
            members.append(i)
            if self.group_size is not None and len(members) >= self.group_size:
                due.extend(self._open.pop(group_key(sample.group_id)))
        if due:
            self._submit(sorted(due))
        return range(start, len(self._samples))

    def finalize(self) -> Any:
        """Submit what waits (open groups), collect the round; its result. The runner then starts a new round."""

        try:
            if not self._samples:
                raise InputError("finalize() of a round with no samples: add() some first")
            waiting = sorted(i for members in self._open.values() for i in members)
            if waiting:
                self._submit(waiting)
            jobs = self.client._job_tickets()
            deadline = None if self.timeout is None else time.monotonic() + self.timeout
            answers = []
            for tickets, positions in self._parts:
                left = None if deadline is None else max(deadline - time.monotonic(), 1e-3)
                answers.append(jobs.collect(tickets, positions, left))
            # each part's answer is in the order of its samples' indices; the parts one after the other
            order = [i for _, positions in self._parts for i in sorted(j for chunk in positions for j in chunk)]
            return result_of(in_order(concat_results(answers), order), [s.group_id for s in self._samples])
        finally:
            self._reset()

    def _submit(self, indices: list[int]) -> None:
        mappings = [
            {f.name: getattr(s, f.name) for f in dataclass_fields(s)} for s in (self._samples[i] for i in indices)
        ]
        tickets, positions = self.client._job_tickets().post(mappings, self.rewards)
        self._parts.append((tickets, [[indices[j] for j in chunk] for chunk in positions]))

    def close(self) -> None:
        """Drop the round (its tickets expire on the server)."""
        self._reset()

    def __enter__(self) -> JobRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
