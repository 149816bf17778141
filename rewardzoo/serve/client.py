"""Call a ``rewardzoo serve`` server from your own loop — the same code as the ``remote`` reward.

With ``url`` the server's address (``"http://reward-host:8765"``) and its bearer token in ``REWARD_TOKEN`` (the
test suite runs these examples against a server of its own, serving ``jpeg_compressibility``)::

    >>> import numpy as np
    >>> import rewardzoo
    >>> from rewardzoo.serve import RewardClient, multi_score
    >>> flat = np.full((64, 64, 3), 128, np.uint8)
    >>> noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    >>> samples = [rewardzoo.Sample(image=img, prompt="a cat", group_id="cats") for img in (flat, noise)]
    >>> with RewardClient(url, token_env="REWARD_TOKEN") as client:
    ...     result = client.score(samples)  # a RewardResult, as the local processor gives
    >>> scores = result.rewards["jpeg_compressibility"]
    >>> list(result.rewards), bool(scores[0] > scores[1])  # the flat image compresses better
    (['jpeg_compressibility'], True)
    >>> advantages = result.advantages()  # normalised within the group "cats"
    >>> bool(advantages[0] > 0 > advantages[1]), float(advantages.sum())
    (True, 0.0)

flow_grpo's ``multi_score(device, score_dict)`` slot, speaking the safe format instead of pickle::

    >>> reward_fn = multi_score(url, {"jpeg_compressibility": 1.0}, token_env="REWARD_TOKEN")
    >>> scores, _ = reward_fn(np.stack([flat, noise]), ["a cat", "a dog"], [{}, {}])  # ({name: (B,), "avg": (B,)}, {})
    >>> sorted(scores), bool((scores["avg"] == scores["jpeg_compressibility"]).all())
    (['avg', 'jpeg_compressibility'], True)
    >>> reward_fn.client.close()
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np

from ..core.engine import RewardResult, as_samples
from ..errors import InputError
from ..integrations.common import image_samples
from ..spec.sample import Sample
from ..transport.http import RetryPolicy, bearer_headers
from ..transport.served import ServedRewards
from .job_client import JobFuture, JobRunner, JobTickets, result_of

__all__ = ["RewardClient", "multi_score"]


class RewardClient:
    """A client of one server. ``timeout_s`` per try; ``retries`` tries after the first (connection errors,
    408, 429, 5xx; backoff from ``backoff_s`` doubling, Retry-After honoured); ``max_concurrency`` requests
    in flight when a call is split (the server's ``max_samples``, groups kept whole); ``token_env`` the
    environment variable holding the server's bearer token; ``fmt`` ``msgpack`` or ``json``;
    ``image_format`` ``raw`` (uint8 arrays: no encoding cost, the default) or ``png`` (lossless, ~30% smaller for
    photographs but ~12 ms of zlib per 512x512 image: worth it only on links slower than ~100 MB/s); ``shm``: for a
    server on this host (its address a loopback one, and it says it shares this machine and user), hand the media
    over in shared memory instead of the body (a pooled segment the pixels are copied into, or none at all for images
    in a :meth:`shared_array`; the server may refuse: the body is then sent). With MessagePack
    and a server that takes them, media travel beside the request's map (:mod:`rewardzoo.transport.frames`).
    Errors after the last retry are :class:`~rewardzoo.errors.HttpError`."""

    def __init__(
        self,
        url: str,
        *,
        token_env: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_concurrency: int = 8,
        fmt: str = "msgpack",
        image_format: str = "raw",
        ready_timeout_s: float = 300.0,
        shm: bool = True,
    ) -> None:
        policy = RetryPolicy.from_options(
            {"retries": retries, "backoff_s": backoff_s, "max_backoff_s": max_backoff_s, "timeout_s": timeout_s},
            owner="RewardClient",
        )
        self._token_env = token_env
        self._jobs: JobTickets | None = None  # submit / collect: made at the first submit
        self.server = ServedRewards(
            url,
            policy=policy,
            token_env=token_env,
            max_concurrency=max_concurrency,
            fmt=fmt,
            image_format=image_format,
            ready_timeout_s=ready_timeout_s,
            owner="RewardClient",
            shm=shm,
        )

    @property
    def rewards(self) -> list[dict[str, Any]]:
        """The served rewards' records (name, kind, fields, higher_is_better, score_range, ...)."""
        return list(self.server.rows.values())

    @property
    def limits(self) -> dict[str, Any]:
        return self.server.limits

    @property
    def transport(self) -> str:
        """``shm``, ``frames`` or ``body``: how this client's requests travel to its server."""
        return self.server.transport

    @staticmethod
    def shared_array(shape: int | Sequence[int], dtype: Any = np.uint8) -> np.ndarray:
        """A zeroed array in shared memory of its own (:func:`rewardzoo.transport.segments.shared_array`): images
        written into it (``arr[i] = image``, or generated there) and scored as ``Sample(image=arr[i])`` by a server on
        this host (transport ``shm``) travel without a single copy: the server reads them in place. Any client of any
        server may send them; elsewhere they travel as other arrays do."""
        from ..transport.segments import shared_array

        return shared_array(shape, dtype)

    def health(self) -> bool:
        return self.server.http.get_json("/health").get("status") == "ok"

    def score(
        self, samples: Iterable[Sample | Mapping[str, Any]], rewards: Sequence[str] | None = None
    ) -> RewardResult:
        """Score samples (``Sample`` objects or mappings of their fields) with the served rewards (or the
        named ones); a :class:`~rewardzoo.RewardResult` as the local processor gives."""
        samples = as_samples(samples)
        if not samples:
            raise InputError("pass at least one sample")
        mappings = [{f.name: getattr(s, f.name) for f in dataclass_fields(s)} for s in samples]
        out = self.server.score(mappings, rewards)
        return result_of(out, [s.group_id for s in samples])

    # ------------------------------------------------------------ submit / collect (rewardzoo.serve.jobs)
    def submit(self, samples: Iterable[Sample | Mapping[str, Any]], rewards: Sequence[str] | None = None) -> JobFuture:
        """Send samples to be scored and return once the server holds them (``POST /v1/jobs``): a
        :class:`concurrent.futures.Future` whose ``result()`` is the :class:`~rewardzoo.RewardResult` that
        :meth:`score` would give, collected in the background; its ``tickets`` and ``positions`` let another
        client :meth:`collect` it (tickets live on the server, until collected or ``--job-ttl-s`` after they finish).
        """
        samples = as_samples(samples)
        if not samples:
            raise InputError("pass at least one sample")
        mappings = [{f.name: getattr(s, f.name) for f in dataclass_fields(s)} for s in samples]
        jobs = self._job_tickets()
        tickets, positions = jobs.post(mappings, rewards)
        group_ids = [s.group_id for s in samples]
        future = jobs.start(tickets, positions)
        return _as_results(future, group_ids)

    def collect(
        self,
        tickets: Sequence[str],
        positions: Sequence[Sequence[int]],
        group_ids: Sequence[Any] | None = None,
        timeout: float | None = None,
    ) -> RewardResult:
        """The result of tickets another client (or this one, before a reconnect) submitted: a future's ``tickets``
        and ``positions``; ``group_ids``: the samples' (for ``advantages()``)."""
        out = self._job_tickets().collect(list(tickets), [list(p) for p in positions], timeout)
        n = sum(len(p) for p in positions)
        return result_of(out, list(group_ids) if group_ids is not None else [None] * n)

    def incremental(
        self, *, group_size: int | None = None, rewards: Sequence[str] | None = None, timeout: float | None = None
    ) -> JobRunner:
        """An incremental runner over this server (``add`` then ``finalize``, as ``processor.incremental()``): each
        ``add`` is submitted at once, so the reward phase overlaps generation (:class:`JobRunner`)."""
        return JobRunner(self, group_size=group_size, rewards=rewards, timeout=timeout)

    def _job_tickets(self) -> JobTickets:
        if self._jobs is None:
            self._jobs = JobTickets(self.server, bearer_headers(self._token_env, owner="RewardClient"))
        return self._jobs

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.close()
        self.server.close()

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_results(future: JobFuture, group_ids: list[Any]) -> JobFuture:
    """A future of RewardResults over ``future`` (of decoded response maps), with its tickets and positions."""
    out = JobFuture(future.tickets, future.positions)

    def done(f: cf.Future[Any]) -> None:
        if f.cancelled():
            out.cancel()
        elif f.exception() is not None:
            out.set_exception(f.exception())
        else:
            out.set_result(result_of(f.result(), group_ids))

    out.set_running_or_notify_cancel()
    future.add_done_callback(done)
    return out


def multi_score(
    url: str, score_dict: Mapping[str, float] | None = None, *, dataset_key: str | None = None, **client_options: Any
) -> Callable[..., tuple[dict[str, np.ndarray], dict]]:
    """flow_grpo's ``multi_score(device, score_dict)`` against a server:
    ``reward_fn(images, prompts, metadata, only_strict=True) -> ({name: (B,), ..., "avg": (B,)}, {})``.

    ``score_dict`` maps served reward names to weights (None: every served reward, ``avg`` the server's
    weighted total); ``avg = sum_k w_k * scores_k`` as in flow_grpo. ``images`` as flow_grpo passes them: a
    (B, 3, H, W) float tensor in [0, 1], a (B, H, W, 3) uint8 array or a list of images. ``dataset_key``:
    the metadata key naming each prompt's dataset (for a server that routes rewards by dataset). A reward
    that does not apply to a sample, or a failed request, raises: nothing becomes a score.
    """
    client = RewardClient(url, **client_options)
    names = list(score_dict) if score_dict is not None else None

    def reward_fn(
        images: Any, prompts: Any, metadata: Any = None, only_strict: bool = True, **_: Any
    ) -> tuple[dict[str, np.ndarray], dict]:
        result = client.score(image_samples(images, prompts, metadata, dataset_key), names)
        if score_dict is None:
            avg = result.total
        else:
            avg = np.zeros(len(result), dtype=np.float32)
            for name, weight in score_dict.items():
                avg = avg + np.float32(weight) * result.rewards[name]
        bad = np.flatnonzero(np.isnan(avg))
        if bad.size:
            raise InputError(
                "no served reward gives this sample a score (check the server's applicable_datasets and dataset_key)",
                sample=int(bad[0]),
            )
        return {**result.rewards, "avg": avg.astype(np.float32)}, {}

    reward_fn.client = client  # type: ignore[attr-defined]
    return reward_fn
