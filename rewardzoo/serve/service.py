"""What the server does with decoded requests, without any web framework: load the processor once, list the
served rewards, and score a batch made of several clients' requests.

Requests merged into one batch never mix their groups: each request's ``group_id`` values are renumbered
apart before the batch is scored (a group split over two requests is two groups, as it would be had each
request been scored alone), and each request gets back exactly its own slice of the result. A merged batch
that fails is scored again request by request, so one client's bad sample fails only that client.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..core.batching import split_on_failure
from ..core.loader import RewardLoader
from ..core.processor import RewardProcessor
from ..core.resolve import load_config
from ..errors import did_you_mean
from ..rewards.base import is_text_extra
from ..shared.groups import group_key
from ..spec.config import RewardConfig, RewardSpec
from ..spec.sample import Sample
from ..transport.wire import PROTOCOL, WireError, WireLimits, encode_result


class RewardService:
    """The served rewards of one config split. :meth:`load` builds the models (once); until it returns,
    :attr:`ready` is False."""

    def __init__(
        self,
        config: RewardConfig | str | os.PathLike[str] | Mapping[str, Any],
        *,
        split: str = "train",
        limits: WireLimits = WireLimits(),
        loader: RewardLoader | None = None,
    ) -> None:
        self.config = config if isinstance(config, RewardConfig) else load_config(config)
        self.specs: tuple[RewardSpec, ...] = self.config.specs(split)
        self.limits = limits
        self.loader = loader or RewardLoader()
        self.ready = False
        self.load_error: BaseException | None = None
        self._processors: dict[tuple[str, ...], RewardProcessor] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    def load(self) -> RewardService:
        """Build every served model (each unique model once); sets :attr:`ready`."""
        try:
            self._processors[self.names] = RewardProcessor(
                self.specs, self.loader, advantage=self.config.advantage, decode=self.config.decode
            )
        except BaseException as exc:
            self.load_error = exc
            raise
        self.ready = True
        return self

    def key(self, rewards: Sequence[str] | None) -> tuple[str, ...]:
        """The served streams a request asks for (None: all), in config order; WireError 400 for unknown names."""
        if rewards is None:
            return self.names
        unknown = [r for r in rewards if r not in self.names]
        if unknown:
            raise WireError(
                f"unknown reward '{unknown[0]}'{did_you_mean(unknown[0], self.names)}; this server "
                f"serves {', '.join(self.names)}",
                field="rewards",
                kind="input",
            )
        wanted = set(rewards)
        return tuple(n for n in self.names if n in wanted)

    def processor(self, key: tuple[str, ...]) -> RewardProcessor:
        with self._lock:
            if key not in self._processors:
                specs = [s for s in self.specs if s.name in key]
                self._processors[key] = RewardProcessor(
                    specs, self.loader, advantage=self.config.advantage, decode=self.config.decode
                )
            return self._processors[key]

    def reward_list(self) -> dict[str, Any]:
        """``GET /v1/rewards``: each served stream's record (what a ``remote`` reward takes as its facts)."""
        base = self._processors[self.names]
        rows = []
        for spec in self.specs:
            reward = base.rewards[spec.name]
            info = reward.info
            rows.append(
                {
                    "name": spec.name,
                    "reward_model": spec.reward_model,
                    "kind": reward.kind,
                    "modality": info.modality,
                    "higher_is_better": info.higher_is_better,
                    "score_range": [_bound(b) for b in info.score_range],
                    "summary": info.summary,
                    "fields": list(reward.inputs.fields) + (["video_fps"] if reward.inputs.frame_rate else []),
                    "applicable_datasets": list(spec.applicable_datasets)
                    if spec.applicable_datasets is not None
                    else None,
                    "weight": _weight_json(spec.weight),
                    "batch_size": spec.batch_size,
                }
            )
        return {"protocol": PROTOCOL, "rewards": rows, "limits": self.limits.as_dict()}

    # -------------------------------------------------------------------------------------- scoring
    def score(self, key: tuple[str, ...], requests: Sequence[Sequence[Sample]]) -> list[dict[str, Any] | BaseException]:
        """Score several requests as one batch; one response map (or the error) per request, in order."""
        processor = self.processor(key)

        def run(batch: list[Sequence[Sample]]) -> list[dict[str, Any]]:
            if len(batch) == 1:
                return [slice_result(processor(list(batch[0])), 0, len(batch[0]))]
            merged, spans = merge_requests(batch)
            result = processor(merged)
            return [slice_result(result, a, b) for a, b in spans]

        # someone's bad sample: each request is scored again alone, so only its sender sees the error
        return list(split_on_failure(run, list(requests)))


def merge_requests(requests: Sequence[Sequence[Sample]]) -> tuple[list[Sample], list[tuple[int, int]]]:
    """One sample list of several requests, each request's groups renumbered apart; each request's span."""
    merged: list[Sample] = []
    spans = []
    numbers: dict[tuple[int, Any], int] = {}
    for r, samples in enumerate(requests):
        start = len(merged)
        for s in samples:
            if s.group_id is not None:
                gid = numbers.setdefault((r, group_key(s.group_id)), len(numbers))
                s = replace(s, group_id=gid)
            merged.append(s)
        spans.append((start, len(merged)))
    return merged, spans


def slice_result(result: Any, a: int, b: int) -> dict[str, Any]:
    """The response map of samples ``a:b`` of a result; an extra no sample of the slice reported is left out."""
    extras = {}
    for name, values in result.extras.items():
        kept = {}
        for key, vec in values.items():
            part = vec[a:b]
            present = np.array([v is not None for v in part]) if is_text_extra(part) else ~np.isnan(part)
            if present.any():
                kept[key] = part
        if kept:
            extras[name] = kept
    return encode_result(
        {k: v[a:b] for k, v in result.rewards.items()},
        result.total[a:b],
        result.applied[a:b],
        {k: v[a:b] for k, v in result.weights.items()},
        extras,
    )


def _weight_json(weight: Any) -> Any:
    """A weight as JSON: a number, a schedule's mapping, or dataset -> either."""
    if isinstance(weight, Mapping):
        return {k: _weight_json(v) for k, v in weight.items()}
    return dict(vars(weight)) if hasattr(weight, "schedule") else weight


# ---------------------------------------------------------------------- OpenRLHF's remote reward model
def _strings(data: Mapping[str, Any], name: str) -> list[str]:
    values = data.get(name)
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise WireError(f"'{name}' must be a list of strings", field=name)
    return values


def openrlhf_samples(data: Any, limits: WireLimits) -> list[Sample]:
    """Samples of OpenRLHF's ``POST /get_reward`` body ``{"query": [...], "prompts": [...], "labels": [...]}``:
    each query (prompt + response, as OpenRLHF decodes it, special tokens kept) split at the prompt it starts
    with into ``prompt`` and ``completion``; a label goes into ``metadata`` as ``{"label": ...}``. WireError:
    400 for a malformed body, 413 over ``max_samples``, 422 (naming the index) for a query that does not start
    with its prompt."""
    if not isinstance(data, dict):
        raise WireError("the body must be a JSON object with 'query' and 'prompts' (OpenRLHF's remote reward model)")
    unknown = sorted(set(data) - {"query", "prompts", "labels"})
    if unknown:
        raise WireError(f"unknown key '{unknown[0]}'; OpenRLHF sends query, prompts and labels", field=unknown[0])
    queries, prompts, labels = _strings(data, "query"), _strings(data, "prompts"), data.get("labels")
    limits.over("max_samples", len(queries), f"the request's {len(queries)} queries")
    if labels is None:
        labels = [None] * len(queries)
    if not isinstance(labels, list) or len(prompts) != len(queries) or len(labels) != len(queries):
        raise WireError(
            f"query, prompts and labels must be lists of the same length, got {len(queries)}, "
            f"{len(prompts)} and {len(labels) if isinstance(labels, list) else labels!r}",
            field="prompts",
        )
    samples = []
    for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels)):
        if not query.startswith(prompt):
            raise WireError(
                f"query {i} does not start with its prompt (OpenRLHF's query is prompt + response); "
                f"prompt {prompt[:60]!r}, query {query[:60]!r}",
                field="query",
                kind="input",
                status=422,
            ).located(sample=i)
        samples.append(
            Sample(
                prompt=prompt, completion=query[len(prompt) :], metadata={"label": label} if label is not None else None
            )
        )
    return samples


def openrlhf_answer(answer: Mapping[str, Any]) -> dict[str, Any]:
    """``{"rewards", "scores", "extra_logs"}`` from a score response map: the weighted total as both rewards and
    scores (OpenRLHF reads ``scores`` for filtering, ``rewards`` for the advantage) and each reward's scores in
    ``extra_logs``. A sample no reward applies to is an error (OpenRLHF has no "not applicable")."""
    from ..errors import InputError

    total = answer["total"]
    for i, value in enumerate(total):
        if value is None:
            raise InputError("no served reward applies to this sample", sample=i)
    return {
        "rewards": list(total),
        "scores": list(total),
        "extra_logs": {k: list(v) for k, v in answer["rewards"].items()},
    }


def _bound(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")
