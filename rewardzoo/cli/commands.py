"""Command line: ``rewardzoo list|card|score|evaluate|serve|demo|plan|fetch|schema|lint|env|compare-reference``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import RewardZooError
from ..jobs.description import ScoreJob
from ..report import add_report_arguments
from ..rewards.info import KINDS, MODALITIES
from .listing import FAMILIES

if TYPE_CHECKING:
    from ..jobs.plan import ScoreRun


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        _require_lock(getattr(args, "require_lock", None))
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


def _add_lock_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--locked",
        dest="require_lock",  # fetch's own --locked is a flag
        metavar="LOCKFILE",
        help="load only the weights a `rewardzoo fetch` lock file names, byte for byte (sets REWARDZOO_LOCK for "
        "this run and the workers it starts)",
    )


def _require_lock(path: str | None) -> None:
    """``--locked LOCKFILE``: check the lock reads, then make every load of this run require it."""
    if path is None:
        return
    from ..core.hub_weights import LOCK_ENV
    from ..shared.lockfile import read_lock

    read_lock(path)  # a missing or malformed lock fails here, before anything loads
    os.environ[LOCK_ENV] = os.path.abspath(path)


def _parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="rewardzoo", description="A multimodal reward zoo for RL fine-tuning.")
    parser.add_argument("--version", action="version", version=f"rewardzoo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "list", help="list the rewards, whether their code is installed and whether their weights are here"
    )
    p.add_argument("--modality", choices=MODALITIES)
    p.add_argument("--kind", choices=KINDS)
    p.add_argument("--family", choices=FAMILIES, help="the reward's family (its package under rewardzoo.rewards)")
    p.add_argument("--installed", action="store_true", help="only rewards whose code (extra) is installed")
    p.add_argument(
        "--downloaded",
        action="store_true",
        help="only rewards that run without a download: installed, and their weights on this machine or none needed",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print JSON instead of a table (with each reward's weights only with --weights or --downloaded)",
    )
    p.add_argument(
        "--weights",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="look for each installed reward's weights on this machine (imports the rewards: seconds); "
        "default: in the table, not in --json",
    )
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("card", help="print a reward's model card")
    p.add_argument("name")
    p.set_defaults(func=cmd_card)

    p = sub.add_parser("score", help="score a JSONL manifest with the rewards of a config")
    p.add_argument("config", help="YAML config path, a reward name (its card's example config) or a shipped config")
    p.add_argument(
        "--input",
        "-i",
        required=True,
        help="JSONL manifest (media paths relative to it); with --engine ray also Parquet (media as "
        "paths or encoded bytes)",
    )
    p.add_argument(
        "--out", "-o", required=True, help="JSONL output, one line per input line; with --engine ray also .parquet"
    )
    p.add_argument("--split", choices=["train", "eval"], default=ScoreJob.split)
    p.add_argument(
        "--chunk-size", type=int, default=ScoreJob.chunk_size, help="samples per processor call (groups kept whole)"
    )
    p.add_argument(
        "--allow-unscored",
        action="store_true",
        help="score a manifest although some samples' dataset matches no reward (their total is null; "
        "their count goes to stderr)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary line")
    p.add_argument("--report", metavar="HTML", help="also write an HTML report of the scores (see `rewardzoo report`)")
    p.add_argument(
        "--engine",
        choices=["local", "ray"],
        default=ScoreJob.engine,
        help="local: this process; ray: an actor pool on Ray Data (pip install 'rewardzoo[ray]')",
    )
    p.add_argument("--actors", type=int, default=ScoreJob.actors, help="(ray) actors, each with its own processor")
    p.add_argument("--gpus-per-actor", type=float, default=ScoreJob.gpus_per_actor, help="(ray) GPUs per actor")
    p.add_argument("--cpus-per-actor", type=float, default=ScoreJob.cpus_per_actor, help="(ray) CPUs per actor")
    p.add_argument(
        "--address",
        help="(ray) join this Ray cluster ('auto': the one `ray start` ran here) instead "
        "of starting a local instance; default: $RAY_ADDRESS when set (Ray jobs set it)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows of an interrupted run of the same job (OUT.partial.jsonl: same input, "
        "config entries and split, else refused) and score the rest",
    )
    p.add_argument(
        "--extras",
        action="store_true",
        help="also write each reward's extras to each row (what ocr read, a judge's per-dimension values: "
        "what /v1/score returns)",
    )
    _add_lock_argument(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("evaluate", help="how well each reward of a config agrees with human preferences or ratings")
    _add_evaluate_arguments(p)
    _add_lock_argument(p)
    p.set_defaults(func=cmd_evaluate)

    add_report_arguments(
        sub.add_parser("report", help="write a self-contained HTML report of a score file or a RewardMonitor log")
    )

    p = sub.add_parser("serve", help="serve a config's rewards over HTTP (pip install 'rewardzoo[serve]')")
    _add_serve_arguments(p)
    _add_lock_argument(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("demo", help="score generated example media with every reward that needs no download")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "plan", help="a config's memory per device before loading (checkpoint headers; exit 1 when it does not fit)"
    )
    _add_plan_arguments(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser(
        "fetch", help="download the weight files a config loads, verify them and write a lock file (offline use)"
    )
    _add_fetch_arguments(p)
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("schema", help="print the JSON Schema of a reward config")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("lint", help="warn about a config that invites reward hacking (exit 1 on warnings, for CI)")
    p.add_argument("config", help="YAML config path, a reward name (its card's example config) or a shipped config")
    p.add_argument("--json", action="store_true", help="print the warnings as a JSON list")
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODE",
        help="leave out a warning by code or name (repeatable), e.g. RZ004 or no-gold-check",
    )
    p.add_argument(
        "--dominance",
        type=float,
        default=None,
        help="share of the weighted typical spread above which one reward dominates (default 0.8)",
    )
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser(
        "compare-reference",
        help="score samples with rewardzoo's implementation of a reward and "
        "with its reference package (in its own environment); print the differences",
    )
    p.add_argument("name", help="a reward name, or with --config the name of one of its entries")
    p.add_argument("--input", "-i", required=True, help="JSONL manifest (media paths relative to it)")
    p.add_argument("--config", help="the config holding the entry NAME (its model path, options, device)")
    p.add_argument("--split", choices=["train", "eval"], default="train", help="(with --config) its split")
    p.add_argument(
        "--model-path",
        help="the weights both implementations read (default: the entry's, or the reward's own download)",
    )
    p.add_argument(
        "--reference-model",
        metavar="MODULE:CLASS",
        help="the wrapper that calls the reference package (default: rewardzoo's for the reward)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--reference-python",
        metavar="PATH",
        help="run the reference with this interpreter (default: the environment rewardzoo builds)",
    )
    where.add_argument(
        "--in-process",
        action="store_true",
        help="run the reference in this process (the reference package must import here)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_compare_reference)

    env = sub.add_parser("env", help="the Python environments of entries with `environment:` (built once, cached)")
    env_sub = env.add_subparsers(dest="env_command", required=True)
    p = env_sub.add_parser("build", help="build (or check) every environment a config names; print where they are")
    p.add_argument("config", help="YAML config path, a reward name or a shipped config")
    p.set_defaults(func=cmd_env_build)
    p = env_sub.add_parser("list", help="list the built environments (key, requirements, size, path)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_env_list)
    p = env_sub.add_parser("remove", help="delete built environments")
    p.add_argument("keys", nargs="*", metavar="KEY", help="an environment's key (or a unique prefix of it)")
    p.add_argument("--all", action="store_true", help="every built environment")
    p.set_defaults(func=cmd_env_remove)
    return parser


def cmd_list(args: argparse.Namespace) -> int:
    from .listing import listing

    weights = not args.json if args.weights is None else args.weights
    rows = listing(args.modality, args.kind, args.family, args.installed, args.downloaded, weights)
    if args.json:
        for r in rows:
            r["score_range"] = [_num(b) if math.isinf(b) else b for b in r["score_range"]]
        print(json.dumps(rows, indent=2))
        return 0
    from .tables import format_table

    table = [["name", "family", "kind", "extra", "higher", "range", "installed", "weights", "summary"]]
    for r in rows:
        table.append(
            [
                r["name"],
                r["family"],
                r["kind"],
                r["extra"] or "-",
                "yes" if r["higher_is_better"] else "no",
                _range(r["score_range"]),
                "yes" if r["installed"] else "no",
                r.get("weights", "not checked"),
                r["summary"],
            ]
        )
    print(format_table(table))
    print(
        "installed: the reward's code (its extra) can be imported; weights: its default files are on this machine "
        "(`rewardzoo plan NAME` names them; --no-weights skips the look)",
        file=sys.stderr,
    )
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    from ..catalog.options import with_options
    from ..registry import card_path

    path = card_path(args.name)
    sys.stdout.write(with_options(path.read_text(encoding="utf-8"), path.stem))
    return 0


def _add_plan_arguments(p: argparse.ArgumentParser) -> None:
    from .plan import add_plan_arguments

    add_plan_arguments(p)


def cmd_plan(args: argparse.Namespace) -> int:
    from .plan import cmd_plan as run_plan

    return run_plan(args)


def _add_fetch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "sources", nargs="+", metavar="CONFIG_OR_NAME", help="YAML config paths, reward names or shipped configs"
    )
    p.add_argument(
        "--to",
        metavar="DIR",
        help="cache folder to fetch into (hub files in DIR/hub, torch files in DIR/torch); then run with HF_HOME=DIR "
        "TORCH_HOME=DIR/torch (default: the caches HF_HOME / HF_HUB_CACHE / TORCH_HOME name)",
    )
    p.add_argument(
        "--revision",
        action="append",
        default=[],
        metavar="[REPO=]REV",
        help="hub revision (branch, tag or commit) for one repository, or for all (repeatable; an entry's "
        "`revision:` comes first)",
    )
    p.add_argument(
        "--lock", metavar="FILE", help="the lock file to write (or read with --locked); default rewardzoo.lock"
    )
    p.add_argument("--locked", action="store_true", help="fetch the commits the lock file names and refuse other bytes")
    p.add_argument("--dry-run", action="store_true", help="list the files and sizes; download nothing")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars")


def cmd_fetch(args: argparse.Namespace) -> int:
    from ..jobs.fetch import run_fetch

    run_fetch(
        args.sources,
        to=args.to,
        revisions=args.revision,
        lock_path=args.lock,
        locked=args.locked,
        dry_run=args.dry_run,
        quiet=args.quiet,
    )
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from ..spec.config import schema_json

    print(schema_json())
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    from .lint import DOMINANCE, lint_config

    dominance = DOMINANCE if args.dominance is None else args.dominance
    found = lint_config(args.config, dominance=dominance, ignore=args.ignore)
    if args.json:
        print(json.dumps([w.as_dict() for w in found], indent=2))
    else:
        for w in found:
            print(f"{args.config}: {w}")
        print(f"{len(found)} warning(s)" if found else "no warnings")
    return 1 if found else 0


def cmd_compare_reference(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..core.resolve import parse_spec, resolve_config
    from ..jobs.compare_reference import compare_reference, find_spec
    from ..jobs.manifest import read_manifest

    if args.config:
        spec = find_spec(resolve_config(args.config).specs(args.split), args.name)
    else:
        spec = parse_spec({"name": args.name})
    if args.model_path:
        spec = replace(spec, model_path=args.model_path)
    reference: dict = {}
    if args.reference_model:
        reference["reward_model"] = args.reference_model
    if args.in_process or args.reference_python:
        reference["environment"] = {"python": args.reference_python} if args.reference_python else None
    samples, lines = read_manifest(args.input)
    found = compare_reference(spec, samples, [f"line {n}" for n in lines], reference or True)
    if args.json:
        print(json.dumps(found.as_dict(), indent=2))
        return 0
    from .tables import format_table

    table = [["sample", "rewardzoo", "reference", "difference"]]
    for row in found.as_dict()["samples"]:
        table.append(
            [
                row["sample"],
                *("-" if row[k] is None else f"{row[k]:.6g}" for k in ("rewardzoo", "reference", "difference")),
            ]
        )
    print(f"{found.name}: rewardzoo vs {found.where}")
    print(format_table(table))
    print(f"max |difference|: {found.max_abs_difference:.3g} over {len(found.labels)} samples")
    return 0


def cmd_env_build(args: argparse.Namespace) -> int:
    from ..core.resolve import resolve_config
    from ..environments.venvs import environment_key, interpreter

    config = resolve_config(args.config)
    envs = list(dict.fromkeys(s.environment for s in (*config.rewards, *config.eval_rewards) if s.environment))
    if not envs:
        raise RewardZooError(f"no entry of '{args.config}' names an environment")
    for env in envs:
        python = interpreter(env)
        key = environment_key(env) if env.python is None else "-"
        print(f"{key}\t{python}\t{env.describe()}")
    return 0


def cmd_env_list(args: argparse.Namespace) -> int:
    from ..environments.venvs import cache_root, list_environments

    rows = list_environments()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no built environments in {cache_root()}")
        return 0
    from .tables import format_table

    table = [["key", "requirements", "system_site_packages", "python", "rewardzoo", "MB", "created", "path"]]
    for r in rows:
        table.append(
            [
                r["key"],
                " ".join(r["requirements"]),
                "yes" if r["system_site_packages"] else "no",
                r["python"],
                r["rewardzoo"],
                f"{r['size_mb']:g}",
                r["created"],
                r["path"],
            ]
        )
    print(format_table(table))
    return 0


def cmd_env_remove(args: argparse.Namespace) -> int:
    from ..environments.venvs import list_environments, remove_environment

    if args.all == bool(args.keys):
        raise RewardZooError("name the environments to remove (`rewardzoo env list` shows their keys) or --all")
    for key in [r["key"] for r in list_environments()] if args.all else args.keys:
        print(f"removed {remove_environment(key)}")
    return 0


def _add_serve_arguments(p: argparse.ArgumentParser) -> None:
    from ..serve.server import add_serve_arguments  # light: imports no server library

    add_serve_arguments(p)


def _add_evaluate_arguments(p: argparse.ArgumentParser) -> None:
    from .evaluate import add_evaluate_arguments

    add_evaluate_arguments(p)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluate import cmd_evaluate as run

    return run(args, _score_with_ray)


def cmd_serve(args: argparse.Namespace) -> int:
    import importlib.util

    missing = [m for m in ("starlette", "uvicorn", "msgpack") if importlib.util.find_spec(m) is None]
    if missing:
        raise RewardZooError(f"rewardzoo serve needs {', '.join(missing)}: pip install 'rewardzoo[serve]'")
    if args.ray and (importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.serve") is None):
        raise RewardZooError("rewardzoo serve --ray needs Ray Serve: pip install 'rewardzoo[serve-ray]'")
    from ..jobs.description import ServeJob
    from ..serve.server import serve_command

    return serve_command(ServeJob.from_options(vars(args)))


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    print(run_demo())
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    import time

    from ..jobs.local import run_local

    job = ScoreJob.from_options(vars(args))
    start = time.perf_counter()
    run = _score_with_ray(job) if job.engine == "ray" else run_local(job)
    plan = run.plan
    if plan.report is not None:
        from ..report import build_report_from_records

        jsonl = plan.rows.unit == "line"  # a Parquet input's media are not the report's to read
        build_report_from_records(
            run.records,
            scores_path=plan.out,
            manifest=plan.job.input if jsonl else None,
            rows=plan.rows if jsonl else None,
            config=job.config,
            out=plan.report,
        )
    if job.engine == "local" and not job.quiet:  # on stderr: stdout stays clean (the Ray engine says its own)
        print(summary_line(run, time.perf_counter() - start), file=sys.stderr)
    return 0


def summary_line(run: ScoreRun, seconds: float) -> str:
    """``score``'s last line on success: rows, rewards, seconds and where the output (and report) went."""
    names = [spec.name for spec in run.plan.specs]
    shown = ", ".join(names[:6]) + (f", ... ({len(names) - 6} more)" if len(names) > 6 else "")
    report = f" and {run.plan.report}" if run.plan.report is not None else ""
    rows = len(run.records)
    return (
        f"rewardzoo: scored {rows} row{'s' * (rows != 1)} with {len(names)} reward{'s' * (len(names) != 1)} "
        f"({shown}) in {seconds:.1f} s: wrote {run.plan.out}{report}"
    )


def _score_with_ray(job: ScoreJob) -> ScoreRun:
    """The Ray engine's run of ``job``, or the pip command when Ray Data is missing."""
    import importlib

    try:
        importlib.import_module("ray.data")  # Ray Data itself, before the engine that needs it
    except ImportError:
        raise RewardZooError("--engine ray needs Ray Data: pip install 'rewardzoo[ray]'") from None
    from ..ray.engine import score_with_ray

    return score_with_ray(job)


def _range(bounds) -> str:
    return "[" + ", ".join(_num(b) for b in bounds) + "]"


def _num(x: float) -> str:
    return ("inf" if x > 0 else "-inf") if math.isinf(x) else f"{x:g}"
