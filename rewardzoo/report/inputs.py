"""The report's other inputs — manifest, config, a second score file — checked against the scores."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.resolve import resolve_config
from ..errors import UnknownConfigError
from ..jobs.manifest import ManifestError, id_key, read_manifest_rows
from ..registry import info, lookup
from ..rewards.info import RewardInfo
from ..shared.groups import GroupKey, group_key
from ..spec.config import RewardConfig, RewardSpec
from ..spec.sample import Sample
from .errors import ManifestFileError, ReportConfigError, ReportMismatchError
from .scores import ScoreTable


@dataclass
class ManifestRows:
    """A manifest aligned with a score file: row i of the scores is ``samples[i]`` (manifest line ``lines[i]``).
    ``groups``: an integer code per row (-1: no group_id), None when no row has a group_id; ``ids``: each row's
    ``id`` (the manifest's, or the line's index in it when it has none)."""

    path: Path
    samples: list[Sample]
    lines: list[int]
    datasets: np.ndarray
    groups: np.ndarray | None
    ids: list


@dataclass(frozen=True)
class RewardMeta:
    """What the report says about one score column: its registry record when one is known."""

    name: str
    reward_model: str
    info: RewardInfo | None
    spec: RewardSpec | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.info.higher_is_better if self.info is not None else True

    @property
    def score_range(self) -> tuple[float, float] | None:
        return self.info.score_range if self.info is not None else None

    @property
    def sign(self) -> float:
        """+1 when higher is better, -1 otherwise: multiplies scores into 'higher is better' order."""
        return 1.0 if self.higher_is_better else -1.0


def read_aligned_manifest(path: str | os.PathLike, scores: ScoreTable) -> ManifestRows:
    """Read ``path`` and match its rows to the score rows (see :func:`aligned_manifest`)."""
    try:
        samples, lines, _, ids = read_manifest_rows(path)  # a missing or unreadable file: an InputError naming it
    except ManifestError as exc:
        raise ManifestFileError(exc.with_label(lambda n: f"line {n}"), path=path) from None
    return aligned_manifest(path, samples, lines, scores, ids)


def aligned_manifest(
    path: str | os.PathLike, samples: list[Sample], lines: list[int], scores: ScoreTable, ids: list | None = None
) -> ManifestRows:
    """The manifest ``path`` (its samples, their lines and ids, already read) matched to the score rows: by id
    when the score rows have ids (the manifest's ``id``, or a line's index when it has none: a score file may
    hold some of the manifest's rows, in any order), else by position (one sample per score row)."""
    own = ids if ids is not None else list(range(len(samples)))
    if scores.ids is not None:
        where = {id_key(v): k for k, v in enumerate(own)}
        order = []
        for row, value in enumerate(scores.ids):
            k = where.get(id_key(value))
            if k is None:
                shown = ", ".join(repr(v) for v in own[:3]) + (", ..." if len(own) > 3 else "")
                raise ReportMismatchError(
                    f"row id {value!r} is not an id of the manifest '{path}' ({'its ids' if ids else 'no id: its line indices'}: "
                    f"{shown}); give the manifest the scores were computed from",
                    path=scores.path,
                    line=int(scores.lines[row]),
                )
            order.append(k)
        samples, lines, own = [samples[k] for k in order], [lines[k] for k in order], [own[k] for k in order]
    elif len(samples) != len(scores):
        raise ReportMismatchError(
            f"the manifest '{path}' has {_count(len(samples), 'sample')} but the score file "
            f"'{scores.path}' has {_count(len(scores), 'row')}; give the manifest the scores "
            "were computed from (rows are matched by position)"
        )
    datasets = np.array([s.dataset for s in samples], dtype=object)
    groups = None
    if any(s.group_id is not None for s in samples):
        codes: dict[GroupKey, int] = {}
        groups = np.array(
            [-1 if s.group_id is None else codes.setdefault(group_key(s.group_id), len(codes)) for s in samples],
            np.int64,
        )
    return ManifestRows(Path(path), samples, lines, datasets, groups, own)


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# ------------------------------------------------------------------------------------------ config
def load_report_config(source: str | os.PathLike | Mapping[str, Any] | RewardConfig) -> RewardConfig:
    """A config as ``rewardzoo score`` takes it: a YAML path, a shipped config name or a reward name."""
    try:
        return resolve_config(source)
    except UnknownConfigError as exc:
        raise ReportConfigError(str(exc)) from None


def reward_metas(scores: ScoreTable, config: RewardConfig | None, label: str = "the config") -> list[RewardMeta]:
    """One record per score column: through the config's spec when a config is given, else by name."""
    if config is None:
        return [RewardMeta(n, n, info(n)) for n in scores.names]
    for split in ("rewards", "eval_rewards"):
        specs = getattr(config, split)
        if {s.name for s in specs} == set(scores.names):
            by_name = {s.name: s for s in specs}
            return [
                RewardMeta(n, by_name[n].reward_model, lookup(by_name[n].reward_model), by_name[n])
                for n in scores.names
            ]
    raise ReportConfigError(
        f"the score file '{scores.path}' has the rewards {', '.join(scores.names)}, but {label} configures "
        f"{', '.join(s.name for s in config.rewards)}"
        + (
            f" (eval_rewards: {', '.join(s.name for s in config.eval_rewards)})"
            if config.eval_rewards != config.rewards
            else ""
        )
        + "; give the config the scores were computed with"
    )


def check_datasets(scores: ScoreTable, manifest: ManifestRows, metas: list[RewardMeta]) -> None:
    """A reward applied to a row whose dataset the config does not route to it: the files do not match."""
    for meta in metas:
        allowed = meta.spec.applicable_datasets if meta.spec is not None else None
        if allowed is None:
            continue
        wrong = scores.applied[meta.name] & ~np.isin(manifest.datasets, np.array(allowed, dtype=object))
        if wrong.any():
            k = int(np.argmax(wrong))
            raise ReportMismatchError(
                f"reward '{meta.name}' was applied, but the manifest's line {manifest.lines[k]} has dataset "
                f"{manifest.datasets[k]!r}, which the config does not route to it ({', '.join(allowed)}); the "
                "scores do not come from this manifest and config",
                path=scores.path,
                line=int(scores.lines[k]),
            )


# ----------------------------------------------------------------------------------------- compare
def match_rows(a: ScoreTable, a_ids: list | None, b: ScoreTable) -> tuple[np.ndarray, np.ndarray, str]:
    """Row indices (into A, into B) of the same samples and how they were matched: by ``id`` when both sides
    have ids, else by position; :class:`ReportMismatchError` when they cannot be matched."""
    if a_ids is not None and b.ids is not None:
        pos_a, pos_b = _unique_ids(a_ids, a), _unique_ids(b.ids, b)
        only_a = [i for i in a_ids if id_key(i) not in pos_b]
        only_b = [i for i in b.ids if id_key(i) not in pos_a]
        if only_a or only_b:
            parts = [
                f"{len(ids)} id(s) only in '{t.path}' (e.g. {', '.join(repr(i) for i in ids[:3])})"
                for ids, t in ((only_a, a), (only_b, b))
                if ids
            ]
            raise ReportMismatchError("the two score files do not hold the same samples: " + "; ".join(parts))
        ia = np.arange(len(a))
        return ia, np.array([pos_b[id_key(i)] for i in a_ids], np.int64), "by id"
    if len(a) != len(b):
        raise ReportMismatchError(
            f"'{a.path}' has {_count(len(a), 'row')} and '{b.path}' has {len(b):,}: rows are "
            "matched "
            "by position, so both must score the same manifest (or give every row an 'id' "
            "in both files)"
        )
    return np.arange(len(a)), np.arange(len(b)), "by position"


def _unique_ids(ids: list, table: ScoreTable) -> dict:
    """id key (:func:`~rewardzoo.jobs.manifest.id_key`) -> row of ``table``; an id used twice is an error."""
    seen: dict = {}
    for k, i in enumerate(ids):
        key = id_key(i)
        if key in seen:
            raise ReportMismatchError(
                f"id {i!r} is used twice (also on line {int(table.lines[seen[key]])})",
                path=table.path,
                line=int(table.lines[k]),
            )
        seen[key] = k
    return seen


def finite_range(bounds: tuple[float, float] | None) -> str:
    """'[0, 1]', '[-inf, 0]' or 'unknown'."""
    if bounds is None:
        return "unknown"
    return "[" + ", ".join(("inf" if b > 0 else "-inf") if math.isinf(b) else f"{b:g}" for b in bounds) + "]"
