"""``remote``: rewards served by ``rewardzoo serve``, named in a trainer's config like local ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, WithJsonSchema

from ..errors import ConfigError, HttpError, InputError, RewardExecutionError, did_you_mean
from ..transport.http import RetryPolicy, bearer_headers
from ..transport.jobs import JobTickets
from ..transport.served import ServedRewards
from .base import Inputs, Reward, RewardOutput
from .info import PER_INSTANCE, RewardInfo
from .options import Field, PositiveInt, PositiveNumber, RewardOptions, model_validator


class RemoteReward(Reward):
    """Scores computed by a rewardzoo server: ``score = sum_k w_k * s_k`` over the served rewards ``k``
        this entry names (``rewards: [a]`` gives ``a``'s score as is; a mapping ``{a: 1.0, b: 0.5}`` weighs
        several), each ``s_k`` exactly what the server's processor computes for that stream.

        Inputs: the union of the fields the named served rewards declare (``dataset`` too when the server routes
        them by dataset; ``group_id`` when one is groupwise), taken from the server's reward list at
        construction; media are sent as raw uint8 arrays (or PNG) and float32/int16 audio. Score range and direction
        come from the server: ``[sum_k w_k lo_k, sum_k w_k hi_k]``; several named rewards must agree on
        ``higher_is_better``. Its kind is the served rewards' (:data:`~rewardzoo.rewards.info.PER_INSTANCE`):
    groupwise when one of them is (one request per group), else pointwise.
        With several named rewards each one's score is also reported as an extra under its served name.
        Options: :class:`Options` (``url`` and ``rewards`` required).

        Failures are never scores: after the last retry (connection errors, 408, 429, 5xx, with backoff and
        Retry-After) a :class:`~rewardzoo.errors.RewardExecutionError` names the server and the served rewards;
        a served reward that does not apply to a sample on the server is an error, not a NaN.
    """

    inputs = Inputs(("prompt",))
    thread_safe = True
    io_bound = True  # its calls wait on the server: the engine overlaps them with the local streams
    kind = PER_INSTANCE

    class Options(RewardOptions):
        url: str | None = None
        """The server's URL (``http://host:port``); required."""
        rewards: ServedWeights = None  # type: ignore[assignment]  # None: not given (refused by _required)
        """The served rewards scored: a list of names (weight 1 each) or a mapping name -> positive weight;
        required."""
        timeout_s: PositiveNumber = 60.0
        """Seconds one request may take (with ``submit``: seconds the server may take to answer a call's jobs)."""
        submit: bool = False
        """Send each call as jobs (``POST /v1/jobs``) and collect the answers by long-polling: no connection is held
        while the server scores, and a broken connection asks for the ticket again instead of sending (and scoring)
        the samples again."""
        max_concurrency: PositiveInt = 8
        """Requests in flight at once."""
        retries: int = Field(3, ge=0)
        """Tries after the first (connection errors, 408, 429, 5xx)."""
        backoff_s: PositiveNumber = 0.5
        """First wait between tries in seconds, doubled each try (a server's Retry-After wins when longer)."""
        max_backoff_s: PositiveNumber = 8.0
        """Longest wait between tries in seconds."""
        token_env: str | None = None
        """The environment variable holding the server's bearer token."""
        format: Literal["msgpack", "json"] = "msgpack"
        """The request and answer encoding."""
        image_format: Literal["raw", "png"] = "raw"
        """How images travel: raw uint8 arrays or PNG."""
        ready_timeout_s: PositiveNumber = 300.0
        """Seconds to wait for the server's reward list when it is still loading."""

        @model_validator(mode="after")
        def _required(self) -> RemoteReward.Options:
            if not self.url:
                raise ConfigError(f"must be the server's URL (http://host:port), got {self.url!r}", field="kwargs.url")
            if self.rewards is None:
                raise ConfigError(
                    "must be a list of served reward names or a mapping name -> weight, got None",
                    field="kwargs.rewards",
                )
            return self

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        if model_path is not None:
            raise ConfigError(
                "a remote reward has no model_path (the server holds the models); remove it", field="model_path"
            )
        opts = self.options
        self.weights = dict(opts.rewards or {})
        policy = RetryPolicy(
            attempts=opts.retries + 1,
            backoff_s=opts.backoff_s,
            max_backoff_s=opts.max_backoff_s,
            timeout_s=opts.timeout_s,
        )
        self.server = ServedRewards(
            str(opts.url),
            policy=policy,
            token_env=opts.token_env,
            max_concurrency=opts.max_concurrency,
            fmt=opts.format,
            image_format=opts.image_format,
            ready_timeout_s=opts.ready_timeout_s,
        )
        try:
            rows = self.server.rows
        except HttpError as exc:
            raise ConfigError(
                f"cannot read the reward list of the rewardzoo server: {exc}", field="kwargs.url"
            ) from exc
        missing = [name for name in self.weights if name not in rows]
        if missing:
            raise ConfigError(
                f"the server {self.server.url} serves no reward '{missing[0]}'"
                f"{did_you_mean(missing[0], rows)}; it serves {', '.join(rows)}",
                field="kwargs.rewards",
            )
        self.served = {name: rows[name] for name in self.weights}
        self.jobs = JobTickets(self.server, bearer_headers(opts.token_env, owner="remote")) if opts.submit else None
        self._facts = served_facts(self.served, self.weights, self.server.url)
        self.decide_kind(self._facts["kind"])  # groupwise: whole groups per call, as the served ones need
        self.inputs = served_inputs(self.served, self._facts["kind"], self.server.limits)

    @property
    def info(self) -> RewardInfo:
        """The card's record of ``remote`` refined with what the server says about the named rewards."""
        card = self.__dict__.get("_info") or RewardInfo.of_class(type(self))
        return card.refined(self._facts)

    @info.setter
    def info(self, value: RewardInfo) -> None:
        self.__dict__["_info"] = value

    def __call__(self, **fields: Sequence[Any]) -> RewardOutput:
        n = len(next(iter(fields.values())))
        samples = [{key: values[i] for key, values in fields.items()} for i in range(n)]
        names = list(self.weights)
        try:
            if self.jobs is None:
                result = self.server.score(samples, names)
            else:
                tickets, positions = self.jobs.post(samples, names)
                result = self.jobs.collect(tickets, positions, self.options.timeout_s)
        except HttpError as exc:
            raise RewardExecutionError(f"{self._label()}: {exc}", reward=self.name) from exc
        except InputError:  # e.g. one sample too large for the server: the engine names the stream and sample
            raise
        total = np.zeros(n)
        extras: dict[str, Any] = {}
        for name, weight in self.weights.items():
            scores = np.asarray(result["rewards"][name], dtype=np.float64)
            missing = np.flatnonzero(np.isnan(scores))
            if missing.size:
                raise RewardExecutionError(
                    f"{self._label()}: served reward '{name}' does not apply to {missing.size} sample(s) (its "
                    f"applicable_datasets on the server: {self.served[name].get('applicable_datasets')}); limit this "
                    "entry with applicable_datasets",
                    reward=self.name,
                    samples=missing.tolist(),
                )
            total += weight * scores
            served_extras = result["extras"].get(name, {})
            if len(self.weights) == 1:
                extras.update(served_extras)
            else:
                extras[name] = scores
                extras.update({f"{name}.{key}": value for key, value in served_extras.items()})
        return RewardOutput(
            total,
            {k: (list(v) if v.dtype == object else v) for k, v in ((k, np.asarray(v)) for k, v in extras.items())},
        )

    def _label(self) -> str:
        return f"rewardzoo server {self.server.url}, served reward(s) {', '.join(self.weights)}"

    def __repr__(self) -> str:
        return f"RemoteReward(url={self.server.url!r}, rewards={list(self.weights)!r})"


def _as_weights(value: Any) -> Any:
    """Served reward names (a name or a list: weight 1 each) as the mapping name -> weight; a mapping unchanged."""
    if isinstance(value, str):
        return {value: 1.0}
    if isinstance(value, (list, tuple)):
        if not all(isinstance(name, str) for name in value):
            raise ValueError(f"must be a list of served reward names or a mapping name -> weight, got {value!r}")
        return dict.fromkeys(value, 1.0)
    return value


#: The ``rewards`` option: served reward names (weight 1 each) or a mapping name -> positive weight, at least one.
ServedWeights = Annotated[
    dict[str, PositiveNumber],
    Field(min_length=1),
    BeforeValidator(_as_weights),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "array", "items": {"type": "string"}},
                {"type": "object", "additionalProperties": {"type": "number"}},
            ]
        }
    ),
]


def served_facts(rows: Mapping[str, Mapping[str, Any]], weights: Mapping[str, float], url: str) -> dict[str, Any]:
    """kind, modality, higher_is_better, score_range and summary of an entry from the server's records."""
    directions = {bool(row["higher_is_better"]) for row in rows.values()}
    if len(directions) > 1:
        ups = [n for n, r in rows.items() if r["higher_is_better"]]
        downs = [n for n, r in rows.items() if not r["higher_is_better"]]
        raise ConfigError(
            f"the served rewards disagree on higher_is_better ({', '.join(ups)} higher, "
            f"{', '.join(downs)} lower); name them in separate remote entries",
            field="kwargs.rewards",
        )
    lo = sum(weights[n] * float(r["score_range"][0]) for n, r in rows.items())
    hi = sum(weights[n] * float(r["score_range"][1]) for n, r in rows.items())
    modalities = {r.get("modality", "any") for r in rows.values()}
    kind = "groupwise" if any(r.get("kind") == "groupwise" for r in rows.values()) else "pointwise"
    return {
        "kind": kind,
        "modality": modalities.pop() if len(modalities) == 1 else "any",
        "higher_is_better": directions.pop(),
        "score_range": (lo, hi),
        "summary": f"served by {url}: " + " + ".join(f"{w:g} * {n}" if w != 1 else n for n, w in weights.items()),
    }


def served_inputs(rows: Mapping[str, Mapping[str, Any]], kind: str, limits: Mapping[str, Any]) -> Inputs:
    """What the entry declares: the served rewards' fields; media as given (PIL, audio channels kept), within
    the server's limits so an oversized sample is refused here, before it is sent."""
    fields = [f for row in rows.values() for f in row.get("fields", ())]
    if any(row.get("applicable_datasets") is not None for row in rows.values()):
        fields.append("dataset")
    if kind == "groupwise":
        fields.append("group_id")
    rate = "video_fps" in fields  # a served reward that samples by time: each video's frame rate travels with it
    fields = [f for f in dict.fromkeys(fields) if f not in ("audio_sample_rate", "video_fps")]
    return Inputs(
        tuple(fields),
        images="array",
        frames="array",
        frame_rate=rate,
        audio="numpy",
        mono=False,
        max_pixels=limits.get("max_pixels"),
        max_frames=limits.get("max_frames"),
        max_seconds=limits.get("max_audio_seconds"),
    )
