"""A score job's planning, the same for every engine: the config, the outputs checked before any scoring, the
input rows read and checked, the rows cut into the chunks the processor is called on."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.engine import unscored
from ..core.resolve import config_source, load_config
from ..errors import RewardZooError, did_you_mean
from ..shared.groups import group_key
from ..spec.config import RewardConfig, RewardSpec
from ..spec.sample import Sample
from .description import ScoreJob
from .inputs import InputRows, read_input
from .output import check_output
from .partial import partial_path


@dataclass(frozen=True)
class Plan:
    """A checked score job: its config ``source`` (as :func:`~rewardzoo.core.resolve.config_source` found it), the
    output and report paths, the reward specs of its split, its input rows and their chunks (index lists)."""

    job: ScoreJob
    source: Any
    out: Path
    report: Path | None
    specs: tuple[RewardSpec, ...]
    rows: InputRows
    chunks: list[list[int]]


@dataclass(frozen=True)
class ScoreRun:
    """A finished score job: its plan and one record per input row (what the output file holds)."""

    plan: Plan
    records: list[dict]


def plan_job(job: ScoreJob) -> Plan:
    """Check everything that can be checked before scoring, in the order a user meets it: options, config,
    outputs, input rows, datasets. Parquet input is the Ray engine's; a ``.parquet`` output is written by both."""
    ray = job.engine == "ray"
    if job.chunk_size <= 0:
        raise RewardZooError("--chunk-size must be positive")
    if ray and job.actors <= 0:
        raise RewardZooError("--actors must be positive")
    source = config_source(job.config)
    config_file = {"the config": Path(source)} if isinstance(source, (str, os.PathLike)) else {}
    inputs = {"--input": Path(job.input), **config_file}
    out = check_output(Path(job.out), inputs)
    partial = partial_path(out)
    for what, path in inputs.items():
        if partial.resolve() == path.resolve():
            raise RewardZooError(
                f"--out '{out}' keeps its partial records in '{partial}', which is {what}; "
                "write the scores to another file"
            )
    report = _report_path(job, out)
    specs = (source if isinstance(source, RewardConfig) else load_config(source)).specs(job.split)
    if out.suffix == ".parquet":
        _check_parquet_output(specs)
    rows = read_input(job.input, tables=ray)
    if job.labels is not None:
        if len(job.labels) != len(rows.rows):
            raise RewardZooError(f"{len(job.labels)} labels for the {len(rows.rows)} rows of '{job.input}'")
        rows.names = job.labels
    check_not_media(rows, {"--out": out, "--out's partial file": partial, **({"--report": report} if report else {})})
    check_datasets(specs, rows, job.allow_unscored)
    return Plan(job, source, out, report, specs, rows, group_preserving_chunks(rows.samples, job.chunk_size))


def _check_parquet_output(specs: Sequence[RewardSpec]) -> None:
    """A Parquet output needs pyarrow, and no reward named as one of its other columns."""
    import importlib.util

    from .output import PARQUET_COLUMNS

    clash = [s.name for s in specs if s.name in PARQUET_COLUMNS]
    if clash:
        raise RewardZooError(
            f"reward '{clash[0]}' has the name of a column of the Parquet output ({', '.join(PARQUET_COLUMNS)}); "
            "rename the entry (name:) or give --out a .jsonl path"
        )
    if importlib.util.find_spec("pyarrow") is None:
        raise RewardZooError(
            "a .parquet --out needs pyarrow: pip install pyarrow (or 'rewardzoo[ray]'), or give a .jsonl path"
        )


def _report_path(job: ScoreJob, out: Path) -> Path | None:
    if not job.report:
        return None
    if out.suffix == ".parquet":
        raise RewardZooError(
            "--report reads a JSONL score file; give --out a .jsonl path, or run `rewardzoo report` on a JSONL output"
        )
    report = Path(job.report)
    if report.resolve() == out.resolve():
        raise RewardZooError(f"--report '{report}' is --out; write the report to another file")
    return check_output(report, {"--input": Path(job.input), "--out": out}, option="--report", holds="the report")


def check_not_media(rows: InputRows, outputs: dict[str, Path]) -> None:
    """Refuse an output that is one of the media files the rows name (by resolved path, not contents)."""
    from .manifest import MEDIA_FIELDS, MEDIA_LIST_FIELDS

    targets = {os.path.realpath(path): what for what, path in outputs.items()}
    names = {os.path.basename(t) for t in targets}
    for i, row in enumerate(rows.rows):
        for key in (*MEDIA_FIELDS, *MEDIA_LIST_FIELDS):
            value = row.get(key)
            for media in value if isinstance(value, list) else [value]:
                if not isinstance(media, str):
                    continue
                if os.path.basename(media) not in names and not os.path.islink(media):
                    continue  # cheap: only a path with an output's name (or a link) can be that output
                what = targets.get(os.path.realpath(media))
                if what is not None:
                    raise RewardZooError(
                        f"{what} '{outputs[what]}' is the {key} of {rows.label(i)}; write it to "
                        "another file (an input is never overwritten)"
                    )


def check_datasets(specs: Sequence[RewardSpec], rows: InputRows, allow: bool) -> None:
    """A row whose dataset no reward applies to is an error (a typo would give null totals), unless allowed
    (then their count and labels go to stderr)."""
    missing = unscored(specs, rows.samples)
    if not missing:
        return
    named = sorted({d for s in specs for d in (s.applicable_datasets or ())})
    if not allow:
        first = rows.samples[missing[0]].dataset
        raise RewardZooError(
            f"{rows.label(missing[0])}, field 'dataset': {first!r} matches no reward of the config "
            f"(their datasets: {', '.join(named)}){did_you_mean(str(first), named)}; "
            f"{len(missing)} sample(s) would get a null total; pass --allow-unscored to score anyway"
        )
    shown = ", ".join(str(rows.numbers[i]) for i in missing[:8]) + (" ..." if len(missing) > 8 else "")
    print(
        f"rewardzoo: {len(missing)} sample(s) match no reward and get a null total ({rows.unit}s {shown})",
        file=sys.stderr,
    )


def group_preserving_chunks(samples: Sequence[Sample], size: int) -> list[list[int]]:
    """Index chunks of about ``size`` samples that never split a group (groups may be non-contiguous)."""
    units: dict[object, list[int]] = {}
    for i, s in enumerate(samples):
        key = ("group", group_key(s.group_id)) if s.group_id is not None else ("single", i)
        units.setdefault(key, []).append(i)
    chunks, current = [], []
    for unit in units.values():
        current.extend(unit)
        if len(current) >= size:
            chunks.append(sorted(current))
            current = []
    if current:
        chunks.append(sorted(current))
    return chunks
