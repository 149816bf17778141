"""Ray Data engine of ``rewardzoo score --engine ray`` and :func:`score_dataset` (design: the package docstring)."""

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
from typing import Any

import ray

from ..errors import InputError, RewardExecutionError, RewardOutputError, RewardZooError
from .inputs import ParquetMedia, Rows, decoded, has_bytes, load_records, load_rows

MAX_RESTARTS = 3
# Chunks queued per actor. With Ray Data's default (2) an actor idled about 1 s in 7 s between chunks of
# ~0.12 s, waiting for the executor to dispatch the next one (bench_ray.py, 2 cores); 4 cut that to 0.2 s.
CHUNKS_IN_FLIGHT_PER_ACTOR = 4


class ChunkScorer:
    """A Ray Data callable class: builds the processor once per actor, scores one chunk (one Ray row) per call.

    A chunk row holds its input rows' indices, labels and light fields as JSON, and, for a Ray Dataset input, its
    encoded media (``media``); a Parquet file's binary media columns are read here, from the file. A reward error
    is returned in the row's ``error`` (not raised: Ray would retry the task).
    """

    def __init__(self, specs: list, parquet: str | None = None, binary: tuple[str, ...] = ()) -> None:
        from ..processor import RewardProcessor

        try:  # a config the loader refuses fails the job with the local command's message, not an actor crash
            self.processor, self.error = RewardProcessor(specs), ""
        except RewardZooError as exc:
            self.processor, self.error = None, str(exc)
        self.media = ParquetMedia(parquet, binary) if parquet else None

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        if self.error:
            return {"chunk": batch["chunk"], "records": [""] * len(batch["chunk"]),
                    "error": [self.error] * len(batch["chunk"])}
        records, errors = [], []
        for k in range(len(batch["chunk"])):
            record, error = self._score(json.loads(batch["indices"][k]), json.loads(batch["labels"][k]),
                                        json.loads(batch["rows"][k]), batch["media"][k])
            records.append(record)
            errors.append(error)
        return {"chunk": batch["chunk"], "records": records, "error": errors}

    def _score(self, indices: list[int], labels: list[str], rows: list[dict], media: bytes) -> tuple[str, str]:
        if self.media is not None:
            try:
                cells_of = self.media.rows(indices)
            except Exception as exc:  # noqa: BLE001 - a file gone or unreadable: the job's error, not a retry
                return "", f"cannot read the media columns of '{self.media.file_path}': {type(exc).__name__}: {exc}"
            rows = [{**row, **cells} for row, cells in zip(rows, cells_of)]
        if media:  # encoded media of a Ray Dataset's rows, pickled by this job's driver (Ray's own transport)
            rows = [{**row, **cells} for row, cells in zip(rows, pickle.loads(media))]
        try:
            with tempfile.TemporaryDirectory(prefix="rewardzoo-media-") as folder:
                result = self.processor([decoded(row, i, folder) for i, row in enumerate(rows)])
                return json.dumps(result.records()), ""
        except (InputError, RewardOutputError, RewardExecutionError) as exc:
            located = exc.samples if not isinstance(exc, InputError) else \
                (None if exc.sample is None else [exc.sample])
            return "", (exc.with_label(labels.__getitem__) if located else str(exc))
        except RewardZooError as exc:
            return "", str(exc)


def ensure_ray(address: str | None, quiet: bool) -> str | None:
    """Join ``address`` (or ``RAY_ADDRESS``, which Ray jobs set), or start a fresh local instance sized to the
    machine; returns where the job runs ("the Ray cluster at ADDR", "a local Ray instance of N CPUs"), or None
    when this process had already initialised Ray (the caller's session, left running).

    Without an address a new instance is started even when a ``ray start`` cluster runs on this machine (a plain
    ``ray.init()`` would join that one and refuse the CPU count). The local instance gets this checkout on
    ``PYTHONPATH`` through the environment it inherits, not a job ``runtime_env``: a job runtime env makes every
    actor wait for a fresh worker process, while the raylet's prestarted workers can host the pool's actors at once.
    """
    if ray.is_initialized():
        return None
    paths = [str(Path(__file__).resolve().parents[2]), os.getcwd(), os.environ.get("PYTHONPATH", "")]
    pythonpath = os.pathsep.join(p for p in paths if p)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": not quiet, "logging_level": "ERROR"}
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}}, **kwargs)
        return f"the Ray cluster at {ray.get_runtime_context().gcs_address}"
    previous = os.environ.get("PYTHONPATH")  # the raylet and its workers inherit it at start; this process
    os.environ["PYTHONPATH"] = pythonpath    # gets its own back
    try:
        ray.init(address="local", num_cpus=os.cpu_count(), **kwargs)
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = previous
    return f"a local Ray instance of {os.cpu_count()} CPUs"


def configure_data(quiet: bool) -> None:
    """Ray Data's context for one scoring run: progress bars on a terminal unless ``quiet``, results as they come."""
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = not quiet and sys.stderr.isatty()
    ctx.enable_operator_progress_bars = ctx.enable_progress_bars
    ctx.execution_options.preserve_order = False  # the driver orders the rows by index itself
    logging.getLogger("ray.data").setLevel(logging.ERROR if quiet else logging.WARNING)


def chunk_dataset(rows: Rows, chunks: list[list[int]]):
    """One Ray row per chunk: the chunk's row indices, labels and light fields (JSON) and any in-row media."""
    items = []
    for k, chunk in enumerate(chunks):
        light, media = [], []
        for i in chunk:
            row = rows.rows[i]
            media.append({key: v for key, v in row.items() if has_bytes(v)})
            light.append({key: v for key, v in row.items() if key not in media[-1]})
        items.append({"chunk": k, "indices": json.dumps(chunk), "labels": json.dumps([rows.labels[i] for i in chunk]),
                      "rows": json.dumps(light), "media": pickle.dumps(media) if any(media) else b""})
    return ray.data.from_items(items, override_num_blocks=max(1, len(items)))


def scored_chunks(rows: Rows, chunks: list[list[int]], specs: list, actors: int, gpus: float, cpus: float):
    """One chunk per call on a pool of ``actors`` actors (no more than there are chunks: an idle actor would only
    load the models); a dead actor is restarted and its chunk retried."""
    ds, actors = chunk_dataset(rows, chunks), max(1, min(actors, len(chunks)))
    with warnings.catch_warnings():  # max_restarts / max_task_retries travel as ray_remote_args (deprecated name)
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
        return ds.map_batches(ChunkScorer, fn_constructor_args=(specs, rows.parquet, rows.binary), batch_size=1,
                              batch_format="numpy", compute=ray.data.ActorPoolStrategy(
                                  size=actors, max_tasks_in_flight_per_actor=CHUNKS_IN_FLIGHT_PER_ACTOR),
                              num_gpus=gpus or None, num_cpus=cpus, max_restarts=MAX_RESTARTS,
                              max_task_retries=MAX_RESTARTS)


def score_dataset(dataset_or_path, config, *, split: str = "train", chunk_size: int = 256, actors: int = 1,
                  gpus_per_actor: float = 0, cpus_per_actor: float = 1, address: str | None = None):
    """Score a JSONL manifest, a Parquet file or a Ray Dataset of manifest-like rows on Ray Data.

    Relative media paths are relative to the file's folder, or to the working directory for a Dataset (whose rows
    are collected on the driver to cut the chunks: give a Parquet file for large encoded media). Returns a Ray
    Dataset of ``{"index", "record"}`` rows, ``record`` the JSON line ``rewardzoo score`` writes for input row
    ``index``. A bad row raises :class:`~rewardzoo.errors.RewardZooError` (its row, field and reward) when consumed.
    """
    from ..cli import group_preserving_chunks
    from ..config import load_config

    ensure_ray(address, quiet=True)
    if isinstance(dataset_or_path, (str, os.PathLike)):
        rows = load_rows(dataset_or_path)
    else:
        rows = load_records(dataset_or_path.take_all(), Path.cwd())
    chunks = group_preserving_chunks(rows.samples, chunk_size)
    specs = list(load_config(config).specs(split))
    scored = scored_chunks(rows, chunks, specs, actors, gpus_per_actor, cpus_per_actor)

    def explode(row: dict) -> list[dict]:
        if row["error"]:
            raise RewardZooError(row["error"])
        return [{"index": i, "record": json.dumps(r)} for i, r in zip(chunks[row["chunk"]], json.loads(row["records"]))]

    return scored.flat_map(explode)


def _read_partial(path: Path, n: int) -> dict[int, dict]:
    done: dict[int, dict] = {}
    if not path.exists():
        return done
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by the interruption
                continue
            if isinstance(row, dict) and isinstance(row.get("index"), int) and 0 <= row["index"] < n:
                done[row["index"]] = row["record"]
    return done


def _write_parquet(path: Path, records: list[dict], specs: list) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {s.name: pa.array([r["rewards"].get(s.name) for r in records], type=pa.float64()) for s in specs}
    cols["total"] = pa.array([r["total"] for r in records], type=pa.float64())
    cols["applied"] = pa.array([r["applied"] for r in records], type=pa.list_(pa.string()))
    cols["index"] = pa.array(range(len(records)), type=pa.int64())
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(pa.table(cols), tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _report_path(args, out: Path) -> Path | None:
    """``--report``: checked before any scoring, as the local command does; it reads a JSONL score file."""
    from ..cli import check_output_path

    if not args.report:
        return None
    if out.suffix == ".parquet":
        raise RewardZooError("--report reads a JSONL score file; give --out a .jsonl path, or run "
                             "`rewardzoo report` on a JSONL output")
    report = check_output_path(Path(args.report), inputs={"--input": Path(args.input), "--out": out})
    if report.resolve() == out.resolve():
        raise RewardZooError(f"--report '{report}' is --out; write the report to another file")
    return report


def score_with_ray(args) -> int:
    """``rewardzoo score --engine ray``: the local command's checks, then the chunks on an actor pool."""
    from ..cli import _check_datasets, _config_source, _is_path, _write_atomically, check_output_path, \
        group_preserving_chunks
    from ..config import load_config
    from ..engine import unscored

    start = time.perf_counter()  # the final line's wall time: the whole command, reading and start-up included
    if args.chunk_size <= 0:
        raise RewardZooError("--chunk-size must be positive")
    if args.actors <= 0:
        raise RewardZooError("--actors must be positive")
    source = _config_source(args.config)
    out = check_output_path(Path(args.out), inputs={"--input": Path(args.input),
                                                    **({"the config": Path(source)} if _is_path(source) else {})})
    report = _report_path(args, out)
    spec_objs = load_config(source).specs(args.split)
    rows = load_rows(args.input)
    numbers = [label.split(" ", 1)[1] for label in rows.labels]  # _check_datasets writes "line N"
    _check_datasets(spec_objs, rows.samples, numbers, args.allow_unscored, unscored(spec_objs, rows.samples))
    specs = list(spec_objs)
    n = len(rows.samples)
    partial = out.with_name(out.name + ".partial.jsonl")
    done = _read_partial(partial, n) if args.resume else {}
    if not args.resume:
        partial.unlink(missing_ok=True)
    chunks = [c for c in group_preserving_chunks(rows.samples, args.chunk_size) if not all(i in done for i in c)]
    ray_start = time.perf_counter()
    where = ensure_ray(args.address, args.quiet)
    ray_own = time.perf_counter() - ray_start  # with ray.shutdown's time: Ray's own share of the wall time
    try:
        configure_data(args.quiet)
        scored_rows = 0
        if chunks:
            ds = scored_chunks(rows, chunks, specs, args.actors, args.gpus_per_actor, args.cpus_per_actor)
            with partial.open("a", encoding="utf-8") as fh:
                for row in ds.iter_rows():
                    if row["error"]:
                        raise RewardZooError(row["error"])
                    chunk = chunks[row["chunk"]]
                    for i, record in zip(chunk, json.loads(row["records"])):
                        done[i] = record
                        fh.write(json.dumps({"index": i, "record": record}) + "\n")
                    fh.flush()
                    scored_rows += len(chunk)
    finally:
        if where is not None:
            stop = time.perf_counter()
            ray.shutdown()
            ray_own += time.perf_counter() - stop
    records = [done[i] for i in range(n)]
    if out.suffix == ".parquet":
        _write_parquet(out, records, specs)
    else:
        _write_atomically(out, records)
    partial.unlink(missing_ok=True)
    wall = time.perf_counter() - start
    print(f"rewardzoo: scored {scored_rows} rows ({n - scored_rows} resumed) in {wall:.1f} s, "
          f"{scored_rows / wall if wall else 0:.1f} rows/s, on {where or 'the running Ray session'}"
          + (f" ({ray_own:.1f} s of it in ray.init and ray.shutdown)" if where else ""), file=sys.stderr)
    if report is not None:
        from ..report import build_report

        build_report(out, manifest=args.input if rows.parquet is None and Path(args.input).suffix != ".parquet"
                     else None, config=args.config, out=report)
    return 0
