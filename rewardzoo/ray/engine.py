"""Ray Data engine of ``rewardzoo score --engine ray`` and :func:`score_dataset` (design: docs/ray.md)."""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from ..core.engine import as_samples
from ..core.resolve import resolve_config
from ..errors import OutputWriteError, RewardZooError
from ..jobs.description import ScoreJob
from ..jobs.inputs import InputRows, has_bytes, read_input, rows_of_records
from ..jobs.output import write_scores
from ..jobs.partial import PartialFile, fingerprint, kept_note, partial_path
from ..jobs.plan import ScoreRun, group_preserving_chunks, plan_job
from ..jobs.records import output_rows
from ..spec.placement import RayPlacement
from .groups import check_cluster_fit, placed_groups
from .inputs import ParquetMedia, decoded
from .stages import BEFORE_ENTRIES, Part, failed, records_of, score_part
from .startup import ensure_ray

if TYPE_CHECKING:
    from ..core.processor import RewardProcessor

MAX_RESTARTS = 3
# Chunks queued per actor. With Ray Data's default (2) an actor idled about 1 s in 7 s between chunks of
# ~0.12 s, waiting for the executor to dispatch the next one (bench_ray.py, 2 cores); 4 cut that to 0.2 s.
CHUNKS_IN_FLIGHT_PER_ACTOR = 4


class ChunkScorer:
    """A Ray Data callable class: builds the processor once per actor, scores one chunk (one Ray row) per call.

    A chunk row holds its input rows' indices, labels and light fields as JSON, and, for a Ray Dataset input, its
    encoded media (``media``); a Parquet file's binary media columns are read here, from the file. ``own``: the
    entries this stage scores (None: all of them); each stage adds its part to the row's ``parts``, and the
    ``final`` one turns the parts into the chunk's records (:mod:`~rewardzoo.ray.stages`). A reward error is
    returned in the row's ``error`` (not raised: Ray would retry the task).
    """

    def __init__(
        self,
        specs: list,
        parquet: str | None = None,
        binary: tuple[str, ...] = (),
        own: tuple[str, ...] | None = None,
        final: bool = True,
    ) -> None:
        from ..core.processor import RewardProcessor

        self.specs, self.final, self.order = specs, final, [s.name for s in specs]
        self.processor: RewardProcessor | None
        try:  # a config the loader refuses fails the job with the local command's message, not an actor crash
            self.processor = RewardProcessor([s for s in specs if own is None or s.name in own])
            self.error = ""
        except RewardZooError as exc:
            self.processor, self.error = None, str(exc)
        self.media = ParquetMedia(parquet, binary) if parquet else None

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        n = len(batch["chunk"])
        if self.error:
            return {"chunk": batch["chunk"], "records": [""] * n, "error": [self.error] * n}
        before = batch.get("parts", [b""] * n)
        out: dict[str, Any] = {"records": [], "error": [], "parts": []}
        for k in range(n):
            parts = pickle.loads(before[k]) if before[k] else []
            record, error, part = self._score(
                json.loads(batch["indices"][k]),
                json.loads(batch["labels"][k]),
                json.loads(batch["rows"][k]),
                batch["media"][k],
                parts,
            )
            out["records"].append(record)
            out["error"].append(error)
            out["parts"].append(b"" if self.final else pickle.dumps([*parts, part]))
        if self.final:
            return {"chunk": batch["chunk"], "records": out["records"], "error": out["error"]}
        keep = ("chunk", "indices", "labels", "rows", "media")
        return {**{key: batch[key] for key in keep}, "parts": out["parts"]}

    def _score(
        self, indices: list[int], labels: list[str], rows: list[dict], media: bytes, parts: list[Part]
    ) -> tuple[str, str, Part | None]:
        assert self.processor is not None  # __call__ answers with the loader's error first
        if media:  # encoded media of a Ray Dataset's rows, pickled by this job's driver (Ray's own transport)
            rows = [{**row, **cells} for row, cells in zip(rows, pickle.loads(media))]
        samples: list = []
        with tempfile.TemporaryDirectory(prefix="rewardzoo-media-") as folder:
            if self.media is not None:  # the chunk's cells as files
                try:
                    cells_of = self.media.files(indices)
                except Exception as exc:
                    error = f"cannot read the media columns of '{self.media.file_path}': {type(exc).__name__}: {exc}"
                    return "", error, Part(error=(BEFORE_ENTRIES, error))
                rows = [{**row, **cells} for row, cells in zip(rows, cells_of)]
            try:
                samples = as_samples([decoded(row, i, folder) for i, row in enumerate(rows)])
            except RewardZooError as exc:  # its samples (if any) named by their rows' labels
                part = failed(exc, self.order, labels.__getitem__)
            else:
                del rows  # (a Ray Dataset's encoded bytes are in the files now)
                part = score_part(self.processor, samples, self.order, labels.__getitem__)
        if not self.final:
            return "", "", part
        record, error = records_of(self.specs, samples, [*parts, part])
        return record, error, None


def configure_data(quiet: bool) -> None:
    """Ray Data's context for one scoring run: progress bars on a terminal unless ``quiet``, results as they come."""
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = not quiet and sys.stderr.isatty()
    ctx.enable_operator_progress_bars = ctx.enable_progress_bars
    ctx.execution_options.preserve_order = False  # the driver orders the rows by index itself
    logging.getLogger("ray.data").setLevel(logging.ERROR if quiet else logging.WARNING)


def chunk_dataset(rows: InputRows, chunks: list[list[int]]):
    """One Ray row per chunk: the chunk's row indices, labels and light fields (JSON) and any in-row media."""
    items = []
    for k, chunk in enumerate(chunks):
        light, media = [], []
        for i in chunk:
            row = rows.rows[i]
            media.append({key: v for key, v in row.items() if has_bytes(v)})
            light.append({key: v for key, v in row.items() if key not in media[-1]})
        items.append(
            {
                "chunk": k,
                "indices": json.dumps(chunk),
                "labels": json.dumps([rows.label(i) for i in chunk]),
                "rows": json.dumps(light),
                "media": pickle.dumps(media) if any(media) else b"",
            }
        )
    return ray.data.from_items(items, override_num_blocks=max(1, len(items)))


def scored_chunks(rows: InputRows, chunks: list[list[int]], specs: list, actors: int, gpus: float, cpus: float):
    """One chunk per call on a pool of ``actors`` actors (no more than there are chunks: an idle actor would only
    load the models); a dead actor is restarted and its chunk retried. An entry with a ``ray:`` block (and those
    sharing its model) is scored in a stage of its own, its pool sized and resourced by the block (a key left out:
    ``actors`` / ``gpus`` / ``cpus``); the entries without one in a last stage with ``actors``, ``gpus``, ``cpus``."""
    ds = chunk_dataset(rows, chunks)
    defaults = RayPlacement(gpus, cpus, actors, None)
    rest, groups = placed_groups(specs, defaults)
    stages = [(g.names, g.placement) for g in groups] + ([(tuple(s.name for s in rest), defaults)] if rest else [])
    check_cluster_fit([(own[0], p) for own, p in stages])
    for k, (own, placement) in enumerate(stages):
        ds = _stage(ds, specs, rows, own if groups else None, k == len(stages) - 1, placement, len(chunks))
    return ds


def _stage(ds, specs: list, rows: InputRows, own, final: bool, placement: RayPlacement, chunks: int):
    """One ``map_batches`` stage of :class:`ChunkScorer` over ``ds``, with ``placement``'s pool and resources."""
    size = max(1, min(placement.replicas or 1, chunks))
    with warnings.catch_warnings():  # max_restarts / max_task_retries travel as ray_remote_args (deprecated name)
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
        return ds.map_batches(
            ChunkScorer,
            fn_constructor_args=(specs, rows.parquet, rows.binary, own, final),
            batch_size=1,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=size, max_tasks_in_flight_per_actor=CHUNKS_IN_FLIGHT_PER_ACTOR),
            num_gpus=placement.num_gpus or None,
            num_cpus=placement.num_cpus,
            max_restarts=MAX_RESTARTS,
            max_task_retries=MAX_RESTARTS,
        )


def score_dataset(
    dataset_or_path,
    config,
    *,
    split: str = "train",
    chunk_size: int = 256,
    actors: int = 1,
    gpus_per_actor: float = 0,
    cpus_per_actor: float = 1,
    address: str | None = None,
    extras: bool = False,
):
    """Score a JSONL manifest, a Parquet file or a Ray Dataset of manifest-like rows on Ray Data.

    Relative media paths are relative to the file's folder, or to the working directory for a Dataset (whose rows
    are collected on the driver to cut the chunks: give a Parquet file for large encoded media). Returns a Ray
    Dataset of ``{"index", "record"}`` rows, ``record`` the JSON line ``rewardzoo score`` (``--extras`` with
    ``extras``) writes for input row ``index``: with its ``id`` and ``metadata``. A bad row raises
    :class:`~rewardzoo.errors.RewardZooError` (its row, field and reward) when consumed.
    """
    ensure_ray(address, quiet=True)
    if isinstance(dataset_or_path, (str, os.PathLike)):
        rows = read_input(dataset_or_path, tables=True)
    else:
        rows = rows_of_records(dataset_or_path.take_all(), Path.cwd())
    chunks = group_preserving_chunks(rows.samples, chunk_size)
    specs = list(resolve_config(config).specs(split))
    scored = scored_chunks(rows, chunks, specs, actors, gpus_per_actor, cpus_per_actor)

    def explode(row: dict) -> list[dict]:
        if row["error"]:
            raise RewardZooError(row["error"])
        chunk, records = chunks[row["chunk"]], json.loads(row["records"])
        joined = output_rows(rows, records, extras=extras, indices=chunk)
        return [{"index": i, "record": json.dumps(r)} for i, r in zip(chunk, joined)]

    return scored.flat_map(explode)


def score_with_ray(job: ScoreJob) -> ScoreRun:
    """``rewardzoo score --engine ray``: the job's plan (the local command's checks), then its chunks on an actor
    pool; writes ``job.out`` (JSONL, or Parquet for a ``.parquet`` path) and returns the records."""
    start = time.perf_counter()  # the final line's wall time: the whole command, reading and start-up included
    plan = plan_job(job)
    rows, out, n = plan.rows, plan.out, len(plan.rows.samples)
    specs = list(plan.specs)
    partial = PartialFile(partial_path(out), fingerprint(job.input, specs, job.split), n, rows, specs)
    done = partial.resume() if job.resume else {}
    chunks = [c for c in plan.chunks if not all(i in done for i in c)]
    ray_start = time.perf_counter()
    where = ensure_ray(job.address, job.quiet)
    ray_own = time.perf_counter() - ray_start  # with ray.shutdown's time: Ray's own share of the wall time
    try:
        configure_data(job.quiet)
        scored_rows = 0
        if chunks:
            partial.before_scoring([i for chunk in chunks for i in chunk])
            ds = scored_chunks(rows, chunks, specs, job.actors, job.gpus_per_actor, job.cpus_per_actor)
            for row in ds.iter_rows():
                if row["error"]:
                    raise kept_note(RewardZooError(row["error"]), partial, len(done))
                chunk = chunks[row["chunk"]]
                scored = json.loads(row["records"])
                partial.add(chunk, scored, resumed=job.resume)
                done.update(zip(chunk, scored))
                scored_rows += len(chunk)
    except OutputWriteError as exc:
        raise kept_note(exc, partial, len(done)) from None
    finally:
        partial.close()
        if where is not None:
            stop = time.perf_counter()
            ray.shutdown()
            ray_own += time.perf_counter() - stop
    records = output_rows(rows, [done[i] for i in range(n)], extras=job.extras)
    try:
        write_scores(out, records, [s.name for s in specs])
    except OutputWriteError as exc:
        raise kept_note(exc, partial, len(done)) from None
    partial.finish()
    wall = time.perf_counter() - start
    print(
        f"rewardzoo: scored {scored_rows} rows ({n - scored_rows} resumed) in {wall:.1f} s, "
        f"{scored_rows / wall if wall else 0:.1f} rows/s, on {where or 'the running Ray session'}"
        + (f" ({ray_own:.1f} s of it in ray.init and ray.shutdown)" if where else ""),
        file=sys.stderr,
    )
    return ScoreRun(plan, records)
