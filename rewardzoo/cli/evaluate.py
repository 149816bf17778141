"""``rewardzoo evaluate``: its arguments and its printed tables (the job is :mod:`rewardzoo.jobs.evaluation`)."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..jobs.evaluation.run import EvaluateJob, EvaluateRun

if TYPE_CHECKING:
    from ..jobs.description import ScoreJob
    from ..jobs.plan import ScoreRun


def add_evaluate_arguments(p: argparse.ArgumentParser) -> None:
    from ..jobs.evaluation.run import format_names

    p.add_argument("config", help="YAML config path, a reward name (its card's example config) or a shipped config")
    p.add_argument("--data", required=True, help="the preference or rating set (media paths relative to it)")
    p.add_argument("--format", required=True, choices=format_names(), help="how --data is laid out (docs/evaluate.md)")
    p.add_argument("--out", help="folder for the manifest, scores and agreement.json (default: a temporary one)")
    p.add_argument("--split", choices=["train", "eval"], default=EvaluateJob.split, help="the config's reward list")
    p.add_argument(
        "--benchmark", help="match the cards' published figures on this benchmark name (default: the format's)"
    )
    p.add_argument("--seed", type=int, default=EvaluateJob.seed, help="seed of the bootstrap resampling")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument(
        "--report",
        metavar="HTML",
        help="also write the `rewardzoo report` page of the scores with its agreement section (table and plot)",
    )
    p.add_argument("--chunk-size", type=int, default=EvaluateJob.chunk_size, help="samples per processor call")
    p.add_argument("--engine", choices=["local", "ray"], default=EvaluateJob.engine, help="as `rewardzoo score`")
    p.add_argument("--actors", type=int, default=EvaluateJob.actors, help="(ray) actors")
    p.add_argument("--gpus-per-actor", type=float, default=EvaluateJob.gpus_per_actor, help="(ray) GPUs per actor")
    p.add_argument("--cpus-per-actor", type=float, default=EvaluateJob.cpus_per_actor, help="(ray) CPUs per actor")
    p.add_argument("--address", help="(ray) the Ray cluster to join")
    p.add_argument("--resume", action="store_true", help="keep the scores of an interrupted run in --out")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line")


def _f(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def format_run(run: EvaluateRun) -> str:
    """The plain-text tables: one row a reward (and a category), then the paired comparisons."""
    from .tables import format_table

    out = run.as_dict()
    lines = [f"{out['data']} ({out['format']}, rule {out['rule']}; benchmark '{out['benchmark']}')"]
    table: list[list[object]] = [["reward", "metric", "value", "95% CI", f"n {out['unit']}s", "published", "note"]]
    for r in out["rewards"]:
        pub = next((p for p in r["published"] if p["metric"] == r["metric"]), None)
        table.append(
            [
                r["reward"],
                r["metric"],
                _f(r["value"]),
                f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]",
                str(r["n"]),
                f"{pub['value']:.3f} ({pub['source']})" if pub else "-",
                r.get("note", ""),
            ]
        )
        for c in r["categories"]:
            table.append(
                [
                    f"  {c['category']}",
                    "",
                    _f(c["value"]),
                    f"[{_f(c['ci_low'])}, {_f(c['ci_high'])}]",
                    str(c["n"]),
                    "",
                    "",
                ]
            )
    lines.append(format_table(table))
    extras = {k: v for r in out["rewards"] for k, v in r.items() if k in ("n_human_ties", "n_rank_ties")}
    if extras:
        counted = "scored by the tie rule" if out["rule"].endswith("_with_ties") else "left out of accuracy"
        lines.append(f"human ties ({counted}): " + ", ".join(f"{k[2:]}={v}" for k, v in extras.items()))
    if out["comparisons"]:
        table = [["a - b", "difference", "95% CI", "p"]]
        for c in out["comparisons"]:
            table.append(
                [
                    f"{c['a']} - {c['b']}",
                    f"{c['difference']:+.3f}",
                    f"[{_f(c['ci_low'])}, {_f(c['ci_high'])}]",
                    _f(c["p_value"]),
                ]
            )
        lines.append("paired bootstrap (same items):")
        lines.append(format_table(table))
    return "\n".join(lines)


def cmd_evaluate(args: argparse.Namespace, ray_run: Callable[[ScoreJob], ScoreRun]) -> int:
    """Run the job; ``ray_run`` is the Ray engine's run of a score job (``--engine ray``)."""
    from ..jobs.evaluation.run import run_evaluate

    job = EvaluateJob.from_options(vars(args))
    score = None
    if job.engine == "ray":

        def score(score_job: ScoreJob) -> list[dict]:
            return ray_run(score_job).records

    run = run_evaluate(job, score)
    if args.report:
        from ..report import build_report, evaluation_inputs

        files = evaluation_inputs(run.out if run.out is not None else str(args.out))
        build_report(
            files["scores_path"],
            manifest=files["manifest"],
            agreement=files["agreement"],
            config=job.config,
            out=args.report,
        )
    print(json.dumps(run.as_dict(), indent=2) if args.json else format_run(run))
    return 0
