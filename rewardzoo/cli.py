"""Command line: ``rewardzoo list|card|score|serve|demo|schema``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from .errors import InputError, RewardExecutionError, RewardOutputError, RewardZooError, did_you_mean
from .report import add_report_arguments
from .rewards.info import MODALITIES


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (RewardZooError, FileNotFoundError) as exc:
        print(f"rewardzoo: error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("rewardzoo: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `rewardzoo list | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rewardzoo", description="A multimodal reward zoo for RL fine-tuning.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list the rewards and whether their extra is installed")
    p.add_argument("--modality", choices=MODALITIES)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("card", help="print a reward's model card")
    p.add_argument("name")
    p.set_defaults(func=cmd_card)

    p = sub.add_parser("score", help="score a JSONL manifest with the rewards of a config")
    p.add_argument("config", help="YAML config path, a reward name (its card's example config) or a shipped config")
    p.add_argument("--input", "-i", required=True,
                   help="JSONL manifest (media paths relative to it); with --engine ray also Parquet (media as "
                        "paths or encoded bytes)")
    p.add_argument("--out", "-o", required=True,
                   help="JSONL output, one line per input line; with --engine ray also .parquet")
    p.add_argument("--split", choices=["train", "eval"], default="train")
    p.add_argument("--chunk-size", type=int, default=256, help="samples per processor call (groups kept whole)")
    p.add_argument("--allow-unscored", action="store_true",
                   help="score a manifest although some samples' dataset matches no reward (their total is null; "
                        "their count goes to stderr)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--report", metavar="HTML", help="also write an HTML report of the scores (see `rewardzoo report`)")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: this process; ray: an actor pool on Ray Data (pip install 'rewardzoo[ray]')")
    p.add_argument("--actors", type=int, default=1, help="(ray) actors, each with its own processor")
    p.add_argument("--gpus-per-actor", type=float, default=0, help="(ray) GPUs per actor")
    p.add_argument("--cpus-per-actor", type=float, default=1, help="(ray) CPUs per actor")
    p.add_argument("--address", help="(ray) join this Ray cluster ('auto': the one `ray start` ran here) instead "
                   "of starting a local instance; default: $RAY_ADDRESS when set (Ray jobs set it)")
    p.add_argument("--resume", action="store_true",
                   help="(ray) keep the rows of an interrupted run (OUT.partial.jsonl) and score the rest")
    p.set_defaults(func=cmd_score)

    add_report_arguments(sub.add_parser("report", help="write a self-contained HTML report of a score file"))

    # -- serve (issue 18) --
    p = sub.add_parser("serve", help="serve a config's rewards over HTTP (pip install 'rewardzoo[serve]')")
    _add_serve_arguments(p)
    p.set_defaults(func=cmd_serve)
    # -- end serve --

    p = sub.add_parser("demo", help="score generated example media with every reward that needs no download")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("schema", help="print the JSON Schema of a reward config")
    p.set_defaults(func=cmd_schema)
    return parser


def cmd_list(args: argparse.Namespace) -> int:
    from .registry import list_rewards

    rows = list_rewards(args.modality)
    if args.json:
        for r in rows:
            r["score_range"] = [_num(b) if math.isinf(b) else b for b in r["score_range"]]
        print(json.dumps(rows, indent=2))
        return 0
    from .tables import format_table

    table = [["name", "modality", "kind", "extra", "higher", "range", "installed", "summary"]]
    for r in rows:
        table.append([r["name"], r["modality"], r["kind"], r["extra"] or "-", "yes" if r["higher_is_better"] else "no",
                      _range(r["score_range"]), "yes" if r["installed"] else "no", r["summary"]])
    print(format_table(table))
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    from .registry import card_path

    sys.stdout.write(card_path(args.name).read_text(encoding="utf-8"))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from .config import schema_json

    print(schema_json())
    return 0


def _add_serve_arguments(p: argparse.ArgumentParser) -> None:
    from .serve.server import add_serve_arguments  # light: imports no server library

    add_serve_arguments(p)


def cmd_serve(args: argparse.Namespace) -> int:
    import importlib.util

    missing = [m for m in ("starlette", "uvicorn", "msgpack") if importlib.util.find_spec(m) is None]
    if missing:
        raise RewardZooError(f"rewardzoo serve needs {', '.join(missing)}: pip install 'rewardzoo[serve]'")
    if args.ray and (importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.serve") is None):
        raise RewardZooError("rewardzoo serve --ray needs Ray Serve: pip install 'rewardzoo[serve-ray]'")
    from .serve.server import serve_command

    return serve_command(args, _config_source(args.config))


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    print(run_demo())
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from .config import load_config
    from .engine import unscored
    from .manifest import ManifestError, read_manifest
    from .processor import RewardProcessor

    if getattr(args, "engine", "local") == "ray":
        return _score_with_ray(args)
    if args.chunk_size <= 0:
        raise RewardZooError("--chunk-size must be positive")
    source = _config_source(args.config)
    out = check_output_path(Path(args.out), inputs={"--input": Path(args.input),
                                                    **({"the config": Path(source)} if _is_path(source) else {})})
    report = None
    if args.report:
        report = check_output_path(Path(args.report), inputs={"--input": Path(args.input), "--out": out})
        if report.resolve() == out.resolve():
            raise RewardZooError(f"--report '{report}' is --out; write the report to another file")
    specs = load_config(source).specs(args.split)
    try:
        samples, lines = read_manifest(args.input)
    except ManifestError as exc:
        raise RewardZooError(exc.with_label(f"line {exc.sample}")) from None
    _check_datasets(specs, samples, lines, args.allow_unscored, unscored(specs, samples))
    processor = RewardProcessor(specs)
    records: list[dict | None] = [None] * len(samples)
    show = not args.quiet and sys.stderr.isatty()
    done = 0
    for chunk in group_preserving_chunks(samples, args.chunk_size):
        try:
            result = processor([samples[i] for i in chunk])
        except (InputError, RewardOutputError, RewardExecutionError) as exc:  # name manifest lines, not indices
            located = exc.samples if not isinstance(exc, InputError) else (None if exc.sample is None else [exc.sample])
            if not located:
                raise
            raise RewardZooError(exc.with_label(lambda i: f"line {lines[chunk[i]]}")) from exc
        for i, record in zip(chunk, result.records()):
            records[i] = record
        done += len(chunk)
        if show:
            print(f"\rscored {done}/{len(samples)} samples", end="", file=sys.stderr, flush=True)
    if show:
        print(file=sys.stderr)
    _write_atomically(out, records)
    if report is not None:
        from .report import build_report

        build_report(out, manifest=args.input, config=args.config, out=report)
    return 0


def _score_with_ray(args: argparse.Namespace) -> int:
    import importlib

    try:
        importlib.import_module("ray.data")
    except ImportError:
        raise RewardZooError("--engine ray needs Ray Data: pip install 'rewardzoo[ray]'") from None
    engine = importlib.import_module("rewardzoo.ray.engine")
    return engine.score_with_ray(args)


def _is_path(source: object) -> bool:
    return isinstance(source, (str, os.PathLike))


def check_output_path(out: Path, inputs: dict[str, Path]) -> Path:
    """Refuse, before any scoring, an ``--out`` that would overwrite an input or cannot be written."""
    resolved = out.resolve()
    for what, path in inputs.items():
        if path.exists() and (resolved == path.resolve() or (out.exists() and out.samefile(path))):
            raise RewardZooError(f"--out '{out}' is {what}; write the scores to another file")
    if out.is_dir():
        raise RewardZooError(f"--out '{out}' is a directory; give a file path")
    parent = resolved.parent
    existing = next(folder for folder in (parent, *parent.parents) if folder.exists())
    if not existing.is_dir():
        raise RewardZooError(f"--out '{out}': '{existing}' is a file, not a folder")
    try:  # try it (permissions, read-only or pseudo file systems); the folder is needed for the output anyway
        parent.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(prefix=f".{out.name}.", dir=parent).close()
    except OSError as exc:
        raise RewardZooError(f"--out '{out}' cannot be written: {exc.strerror or exc}") from None
    return out


def _check_datasets(specs, samples, lines, allow: bool, missing: list[int]) -> None:
    """A sample whose dataset no reward applies to is an error (a typo would give null totals), unless allowed."""
    if not missing:
        return
    named = sorted({d for s in specs for d in (s.applicable_datasets or ())})
    if not allow:
        first = samples[missing[0]].dataset
        raise RewardZooError(f"line {lines[missing[0]]}, field 'dataset': {first!r} matches no reward of the config "
                             f"(their datasets: {', '.join(named)}){did_you_mean(str(first), named)}; "
                             f"{len(missing)} sample(s) would get a null total; pass --allow-unscored to score anyway")
    shown = ", ".join(str(lines[i]) for i in missing[:8]) + (" ..." if len(missing) > 8 else "")
    print(f"rewardzoo: {len(missing)} sample(s) match no reward and get a null total (lines {shown})", file=sys.stderr)


def _config_source(name: str):
    """A YAML path as given; else a shipped use-case config; else a reward's example config (its card)."""
    from .registry import example_config, info
    from .resources import config_path

    if Path(name).is_file() or name.endswith((".yaml", ".yml")):
        return name
    try:
        return config_path(name)
    except FileNotFoundError:
        if info(name) is None:
            raise
    return example_config(name)


def group_preserving_chunks(samples, size: int) -> list[list[int]]:
    """Index chunks of about ``size`` samples that never split a group (groups may be non-contiguous)."""
    units: dict[object, list[int]] = {}
    for i, s in enumerate(samples):
        key = ("group", type(s.group_id).__name__, s.group_id) if s.group_id is not None else ("single", i)
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


def _write_atomically(path: Path, records: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make the scores private; write them like any file
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _range(bounds) -> str:
    return "[" + ", ".join(_num(b) for b in bounds) + "]"


def _num(x: float) -> str:
    return ("inf" if x > 0 else "-inf") if math.isinf(x) else f"{x:g}"


if __name__ == "__main__":
    raise SystemExit(main())
