"""The evaluate job: a set read, its members written as a manifest and scored through the score job (the same
batched, resumable run as ``rewardzoo score``), each reward's agreement computed.

The output folder holds ``members.jsonl`` (the manifest; one line a member, with its ``id`` when the data's lines
have ids), ``scores.jsonl`` (the score job's output, resumable with ``resume``; its rows are joined back to the
members by id) and ``agreement.json`` (what :meth:`EvaluateRun.as_dict` returns).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ...errors import ConfigError, InputError, did_you_mean
from ..description import ScoreJob, from_options
from .metrics import Agreement, agreement, compare
from .sets import EvalSet


def _readers() -> dict[str, Callable[[Path, Path], EvalSet]]:
    from . import edit, formats, genai, layouts

    return {
        "pairs": lambda path, _: formats.read_pairs(path),
        "rankings": lambda path, _: formats.read_rankings(path),
        "ratings": lambda path, _: formats.read_ratings(path),
        **layouts.LAYOUTS,
        "genai_bench_image": genai.read_genai_bench_image,
        "genai_bench_video": genai.read_genai_bench_video,
        "genai_bench_edit": edit.read_genai_bench_edit,
        "editreward_bench": edit.read_editreward_bench,
    }


def format_names() -> list[str]:
    """The formats ``--format`` takes."""
    return sorted(_readers())


def read_set(path: str | os.PathLike, fmt: str, media_dir: str | os.PathLike) -> EvalSet:
    """The set at ``path`` read as format ``fmt`` (a layout holding encoded media writes them to ``media_dir``)."""
    readers = _readers()
    if fmt not in readers:
        raise ConfigError(f"unknown format '{fmt}'{did_you_mean(fmt, readers)}; one of {', '.join(sorted(readers))}")
    return readers[fmt](Path(path), Path(media_dir))


@dataclass(frozen=True)
class EvaluateJob:
    """``rewardzoo evaluate``: the rewards of ``config`` (its ``split``, eval by default) against the human
    judgements of ``data`` read as ``format``. ``out``: a folder for the manifest, scores and results (default:
    a temporary one, not resumable); ``benchmark``: the name the cards' published figures are matched on
    (default: the format's); ``seed`` of the bootstrap; the score job's ``chunk_size``, ``engine``, ``actors``,
    ``gpus_per_actor``, ``cpus_per_actor``, ``address``, ``resume`` and ``quiet``."""

    config: Any
    data: str
    format: str
    out: str | None = None
    split: Literal["train", "eval"] = "eval"
    benchmark: str | None = None
    seed: int = 0
    chunk_size: int = 256
    engine: Literal["local", "ray"] = "local"
    actors: int = 1
    gpus_per_actor: float = 0
    cpus_per_actor: float = 1
    address: str | None = None
    resume: bool = False
    quiet: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> EvaluateJob:
        """A job from a mapping holding (at least) its fields, e.g. ``vars(args)``."""
        return from_options(cls, options)


@dataclass
class EvaluateRun:
    """A finished evaluation: the set, one :class:`Agreement` a reward, the published figures that match, the
    paired comparisons and the notes (e.g. a groupwise reward scored pairs as groups of two)."""

    data: EvalSet
    benchmark: str
    results: list[Agreement]
    published: dict[str, list[dict]] = field(default_factory=dict)
    comparisons: list[dict] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    out: Path | None = None

    def as_dict(self) -> dict:
        return {
            "data": str(self.data.source),
            "format": self.data.name,
            "benchmark": self.benchmark,
            "rule": self.data.rule,
            "unit": self.data.unit,
            "rewards": [
                {
                    **r.as_dict(),
                    "published": self.published.get(r.reward, []),
                    **({"note": self.notes[r.reward]} if r.reward in self.notes else {}),
                }
                for r in self.results
            ],
            "comparisons": self.comparisons,
        }


def _kinds(specs) -> dict[str, tuple[str, bool, str]]:
    """name -> (kind, higher_is_better, card name) of each spec, from the registry (nothing loaded)."""
    from ...core.loader import resolve_reward

    out = {}
    for spec in specs:
        resolved = resolve_reward(spec)
        record = resolved.record
        out[spec.name] = (resolved.implementation.kind or record.kind, record.higher_is_better, record.name)
    return out


def _write_manifest(path: Path, data: EvalSet, groups: bool) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i, row in enumerate(data.members):
            line = row if groups else {k: v for k, v in row.items() if k != "group_id"}
            fh.write(json.dumps({"id": data.ids[i], **line} if data.ids is not None else line) + "\n")


def joined(records: list[dict], data: EvalSet) -> list[dict]:
    """The score job's rows in member order, joined by id (the data's member ids, else the members' indices:
    what the score job names a row without an id by)."""
    from ..manifest import id_key

    by_id = {id_key(r["id"]): r for r in records}
    wanted = data.ids if data.ids is not None else list(range(len(data.members)))
    missing = [k for k, i in enumerate(wanted) if id_key(i) not in by_id]
    if missing:
        raise InputError(f"the scores have no row for {data.labels[missing[0]]} (id {wanted[missing[0]]!r})")
    return [by_id[id_key(i)] for i in wanted]


def run_evaluate(job: EvaluateJob, score: Callable[[ScoreJob], list[dict]] | None = None) -> EvaluateRun:
    """Read, score (through the score job) and compute agreement; see :class:`EvaluateJob`. ``score`` runs the
    score job and returns its records (default: :func:`~rewardzoo.jobs.local.run_local`; the command line passes
    the Ray engine's run for ``--engine ray``)."""
    from ...catalog.published import published
    from ...core.resolve import config_source, load_config
    from ...spec.config import RewardConfig

    folder = _out_folder(job.out, job.data) if job.out else Path(tempfile.mkdtemp(prefix="rewardzoo-evaluate-"))
    data = read_set(job.data, job.format, folder / "media")
    source = config_source(job.config)
    specs = (source if isinstance(source, RewardConfig) else load_config(source)).specs(job.split)
    kinds = _kinds(specs)
    notes = {}
    for name, (kind, _, _) in kinds.items():
        if kind == "groupwise":
            if not data.grouped:
                raise ConfigError(
                    f"reward '{name}' is groupwise and the '{data.name}' set has no groups to score (its items are "
                    "rated one by one); evaluate it on pairs or rankings",
                    entry=name,
                )
            notes[name] = (
                "groupwise: each pair scored as a group of two" if data.unit == "pair" else "groupwise: each group"
            )
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "members.jsonl"
    _write_manifest(manifest, data, groups=bool(notes))
    score_job = ScoreJob(
        config=job.config,
        input=str(manifest),
        out=str(folder / "scores.jsonl"),
        split=job.split,
        chunk_size=job.chunk_size,
        quiet=job.quiet,
        engine=job.engine,
        actors=job.actors,
        gpus_per_actor=job.gpus_per_actor,
        cpus_per_actor=job.cpus_per_actor,
        address=job.address,
        resume=job.resume,
        labels=tuple(data.labels),
    )
    records = joined((score or _run_local)(score_job), data)
    benchmark = job.benchmark or data.benchmark or data.name
    results, matched = [], {}
    for spec in specs:
        kind, higher, card = kinds[spec.name]
        scores = np.array([np.nan if (v := r["rewards"].get(spec.name)) is None else v for r in records], dtype=float)
        missing = np.flatnonzero(np.isnan(scores))
        if missing.size:
            raise InputError(
                f"reward '{spec.name}' gave no score to {data.labels[missing[0]]} ({missing.size} member(s) unscored: "
                "not applicable to their dataset?); an unscored item is never counted as agreement"
            )
        results.append(agreement(spec.name, data, scores if higher else -scores, seed=job.seed))
        matched[spec.name] = [p.as_dict() for p in published(card) if p.benchmark == benchmark]
    comparisons = [
        c for i, a in enumerate(results) for b in results[i + 1 :] if (c := compare(a, b, job.seed)) is not None
    ]
    run = EvaluateRun(data, benchmark, results, matched, comparisons, notes, folder)
    (folder / "agreement.json").write_text(json.dumps(run.as_dict(), indent=2) + "\n", encoding="utf-8")
    return run


#: What evaluate writes into its --out folder.
WRITTEN = ("members.jsonl", "scores.jsonl", "agreement.json", "media")


def _out_folder(out: str | os.PathLike, data_path: str | os.PathLike) -> Path:
    """The --out folder, refused when it is a file, is the data's own folder (the run's files would mix with the
    data set's, and ``media/`` or ``members.jsonl`` could be the set's own), or names the data file itself."""
    folder, data = Path(out), Path(data_path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out '{folder}' is a file; give a folder for {', '.join(WRITTEN)}")
    if folder.resolve() == data.resolve().parent:
        raise ConfigError(
            f"--out '{folder}' is the folder of --data '{data}'; give a folder of its own (evaluate writes "
            f"{', '.join(WRITTEN)} there)",
        )
    if any((folder / name).resolve() == data.resolve() for name in WRITTEN):
        raise ConfigError(f"--out '{folder}' would overwrite --data '{data}'")
    return folder


def _run_local(job: ScoreJob) -> list[dict]:
    from ..local import run_local

    return run_local(job).records
