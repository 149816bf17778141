"""Ray Data engine of ``rewardzoo score --engine ray``.

The driver reads the manifest as the local CLI does (:func:`~rewardzoo.manifest.read_manifest`, line-numbered
errors) and cuts it into the same group-preserving chunks (:func:`~rewardzoo.cli.group_preserving_chunks`), so a
group is never split, however large, and every reward sees exactly the calls it sees locally: the scores are
bit-identical. One Ray Data row is one chunk; a pool of :class:`ChunkScorer` actors (the processor built once per
actor) scores them. A reward error is returned as a row (not raised), so Ray does not retry it; a dying actor is
restarted (``max_restarts``) and its chunk retried (``max_task_retries``).

``--resume``: the driver appends every scored chunk to ``OUT.partial.jsonl`` (``{"index": i, "record": ...}``
lines); a resumed run keeps those rows, scores the rest and writes the final file whole and in order.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import ray

from ..errors import InputError, RewardExecutionError, RewardOutputError, RewardZooError

MAX_RESTARTS = 3


def _load_rows(path: str | Path) -> tuple[list, list[str], list[dict]]:
    """(samples, row labels, resolved dicts) of a JSONL manifest or a Parquet file; errors as in ``rewardzoo
    score`` (a JSONL row is named by its 1-based line, a Parquet row by its 0-based row index)."""
    from ..manifest import ManifestError, _lines, _resolve_paths, read_manifest

    if Path(path).suffix == ".parquet":
        return _load_parquet(Path(path))
    try:
        samples, lines = read_manifest(path)
    except ManifestError as exc:
        raise RewardZooError(exc.with_label(f"line {exc.sample}")) from None
    root = Path(path).parent
    dicts = [_resolve_paths(data, root) for _, data in _lines(Path(path))]
    return samples, [f"line {n}" for n in lines], dicts


def _load_parquet(path: Path) -> tuple[list, list[str], list[dict]]:
    """Parquet rows as manifest lines: null columns are absent; media columns are paths (relative to the file's
    folder) or, for ``image``, encoded image bytes."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise RewardZooError(f"input '{path}' is not a file")
    return _load_records(pq.read_table(path).to_pylist(), path.parent)


def _load_records(records: list[dict], root: Path) -> tuple[list, list[str], list[dict]]:
    """Table rows (Parquet, a Ray Dataset) as manifest lines; relative media paths are relative to ``root``."""
    from ..manifest import _resolve_paths
    from ..sample import Sample

    samples, dicts = [], []
    for i, row in enumerate(records):
        data = {k: v for k, v in row.items() if v is not None}
        encoded = {k: v for k, v in data.items() if isinstance(v, (bytes, bytearray))}
        try:
            bad = next((k for k in encoded if k != "image"), None)
            if bad is not None:
                raise InputError("encoded bytes are supported for 'image' only; give a file path", field=bad)
            if isinstance(data.get("metadata"), dict):
                data["metadata"] = json.dumps(data["metadata"])
            resolved = {**_resolve_paths({k: v for k, v in data.items() if k not in encoded}, root), **encoded}
            samples.append(Sample.from_dict({k: v for k, v in resolved.items() if k not in encoded}))
        except InputError as exc:
            raise RewardZooError(exc.with_label(f"row {i}")) from None
        dicts.append(resolved)
    return samples, [f"row {i}" for i in range(len(dicts))], dicts


def _decoded(data: dict, index: int) -> dict:
    """A Parquet row's encoded image bytes as a PIL image (errors name the field and the sample)."""
    if isinstance(data.get("image"), (bytes, bytearray)):
        from PIL import Image

        try:
            data = {**data, "image": Image.open(io.BytesIO(data["image"]))}
        except Exception as exc:  # noqa: BLE001 - any decoder failure is a bad input row
            raise InputError(f"cannot read image bytes: {type(exc).__name__}: {exc}", field="image",
                             sample=index) from None
    return data


class ChunkScorer:
    """A Ray Data callable class: builds the processor once, scores one chunk (row) per call."""

    def __init__(self, specs: list) -> None:
        from ..processor import RewardProcessor

        self.processor = RewardProcessor(specs)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out_records, out_errors = [], []
        for samples_json, lines_json in zip(batch["samples"], batch["lines"]):
            labels = json.loads(lines_json)
            try:
                result = self.processor([_decoded(d, i) for i, d in enumerate(pickle.loads(samples_json))])
                out_records.append(json.dumps(result.records()))
                out_errors.append("")
            except (InputError, RewardOutputError, RewardExecutionError) as exc:
                located = exc.samples if not isinstance(exc, InputError) else \
                    (None if exc.sample is None else [exc.sample])
                msg = exc.with_label(labels.__getitem__) if located else str(exc)
                out_records.append("")
                out_errors.append(msg)
            except RewardZooError as exc:
                out_records.append("")
                out_errors.append(str(exc))
        return {"chunk": batch["chunk"], "records": out_records, "error": out_errors}


def _ensure_ray(address: str | None, quiet: bool) -> bool:
    """Start (or join, with ``address``) Ray; True when this call started it."""
    if ray.is_initialized():
        return False
    root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": os.pathsep.join(p for p in (root, os.getcwd(), os.environ.get("PYTHONPATH", "")) if p)}
    kwargs: dict[str, Any] = {"runtime_env": {"env_vars": env}, "include_dashboard": False,
                              "log_to_driver": not quiet, "logging_level": "ERROR"}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=os.cpu_count(), **kwargs)
    return True


def _specs_dicts(config, split: str) -> list:
    from ..config import load_config

    return list(load_config(config).specs(split))


def _chunk_dataset(dicts: list[dict], lines: list[str], chunks: list[list[int]]):
    rows = [{"chunk": k, "samples": pickle.dumps([dicts[i] for i in c]), "lines": json.dumps([lines[i] for i in c])}
            for k, c in enumerate(chunks)]
    return ray.data.from_items(rows, override_num_blocks=max(1, len(rows)))


def _scored(ds, specs: list, actors: int, gpus: float, cpus: float):
    """One chunk per call on ``actors`` actors; a dead actor is restarted and its chunk retried."""
    with warnings.catch_warnings():  # max_restarts / max_task_retries travel as ray_remote_args (deprecated name)
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
        return ds.map_batches(ChunkScorer, fn_constructor_args=(specs,), batch_size=1, batch_format="numpy",
                              compute=ray.data.ActorPoolStrategy(size=actors), num_gpus=gpus or None,
                              num_cpus=cpus, max_restarts=MAX_RESTARTS, max_task_retries=MAX_RESTARTS)


def score_dataset(dataset_or_path, config, *, split: str = "train", chunk_size: int = 256, actors: int = 1,
                  gpus_per_actor: float = 0, cpus_per_actor: float = 1, address: str | None = None):
    """Score a JSONL manifest, a Parquet file or a Ray Dataset of manifest-like rows (relative media paths: to the
    file's folder, or to the working directory for a Dataset) on Ray Data. Returns a Ray Dataset of
    ``{"index", "record"}`` rows, ``record`` the JSON line ``rewardzoo score`` writes for input row ``index``.
    A bad row raises :class:`~rewardzoo.errors.RewardZooError` (its row, field and reward) when consumed."""
    from ..cli import group_preserving_chunks

    _ensure_ray(address, quiet=True)
    if isinstance(dataset_or_path, (str, os.PathLike)):
        samples, lines, dicts = _load_rows(dataset_or_path)
    else:  # a Ray Dataset: its rows come to the driver (chunks are cut there, so groups stay whole)
        samples, lines, dicts = _load_records(dataset_or_path.take_all(), Path.cwd())
    chunks = group_preserving_chunks(samples, chunk_size)
    specs = _specs_dicts(config, split)
    scored = _scored(_chunk_dataset(dicts, lines, chunks), specs, actors, gpus_per_actor, cpus_per_actor)

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


def _write_parquet(path: Path, records: list[dict], specs: list[dict]) -> None:
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [s.name for s in specs]
    cols = {name: pa.array([r["rewards"].get(name) for r in records], type=pa.float64()) for name in names}
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


def score_with_ray(args) -> int:
    """``rewardzoo score --engine ray``: the local command's checks, then the chunks on an actor pool."""
    from ..cli import (
        _check_datasets,
        _config_source,
        _is_path,
        _write_atomically,
        check_output_path,
        group_preserving_chunks,
    )
    from ..config import load_config
    from ..engine import unscored

    if args.chunk_size <= 0:
        raise RewardZooError("--chunk-size must be positive")
    if args.actors <= 0:
        raise RewardZooError("--actors must be positive")
    if args.report:
        raise RewardZooError("--report is not supported with --engine ray; run `rewardzoo report` on the output")
    source = _config_source(args.config)
    out = check_output_path(Path(args.out), inputs={"--input": Path(args.input),
                                                    **({"the config": Path(source)} if _is_path(source) else {})})
    spec_objs = load_config(source).specs(args.split)
    samples, lines, dicts = _load_rows(args.input)
    numbers = [label.split(" ", 1)[1] for label in lines]  # _check_datasets writes "line N"
    _check_datasets(spec_objs, samples, numbers, args.allow_unscored, unscored(spec_objs, samples))
    specs = list(spec_objs)
    partial = out.with_name(out.name + ".partial.jsonl")
    done = _read_partial(partial, len(samples)) if args.resume else {}
    if not args.resume:
        partial.unlink(missing_ok=True)
    chunks = [c for c in group_preserving_chunks(samples, args.chunk_size) if not all(i in done for i in c)]
    start = time.perf_counter()
    started = _ensure_ray(args.address, args.quiet)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = not args.quiet and sys.stderr.isatty()
        if args.quiet:
            logging.getLogger("ray.data").setLevel(logging.ERROR)
        ctx.execution_options.preserve_order = True
        scored_rows = 0
        if chunks:
            ds = _scored(_chunk_dataset(dicts, lines, chunks), specs, args.actors, args.gpus_per_actor,
                         args.cpus_per_actor)
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
        if started:
            ray.shutdown()
    records = [done[i] for i in range(len(samples))]
    if out.suffix == ".parquet":
        _write_parquet(out, records, specs)
    else:
        _write_atomically(out, records)
    partial.unlink(missing_ok=True)
    wall = time.perf_counter() - start
    print(f"rewardzoo: scored {scored_rows} rows ({len(samples) - scored_rows} resumed) in {wall:.1f} s, "
          f"{scored_rows / wall if wall else 0:.1f} rows/s", file=sys.stderr)
    return 0
