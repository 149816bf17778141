"""The client side of submit / collect (:mod:`rewardzoo.serve.jobs`) with results as
:class:`~rewardzoo.RewardResult`: :meth:`RewardClient.submit <rewardzoo.serve.client.RewardClient.submit>`, ``collect`` and ``incremental``
(:class:`JobRunner`). Posting and collecting tickets is :mod:`rewardzoo.transport.jobs`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import fields as dataclass_fields
from typing import Any

from ..core.engine import RewardResult, as_samples
from ..errors import InputError
from ..shared.groups import group_key
from ..shared.options import positive_float, positive_int
from ..transport.jobs import JobFuture, JobTickets
from ..transport.served import concat_results, in_order

__all__ = ["JobFuture", "JobRunner", "JobTickets"]


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
