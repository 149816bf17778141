"""`rewardzoo report` at scale: a 100,000-row score file with its manifest (issue goal: under 30 s, under 20 MB).

Workload: 100,000 rows, 6 reward columns (one with 10 % nulls), 2 datasets, groups of 8, a manifest whose
rows point at 20 PNG images 256x256 (thumbnails are made for the samples shown), default --top 8.

1. Report: ``build_report(scores, manifest=...)`` against a baseline measured in the same run: reading
   the score file with ``json.loads`` per line and a NumPy summary per reward (mean, std, 7 quantiles) —
   the least anyone does to look at a score file. Both interleaved, medians.
2. Compare mode: the same plus ``--compare`` with a second score file of the same rows (bootstrap
   intervals, 1,000 resamples of 100,000 pairs per reward), against the baseline reading both files.
3. HTML size of each report.

Run: python benchmarks/bench_report.py [--rows 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
from results_io import figure, measure, write_results
from timing import interleaved

NAMES = (
    "jpeg_compressibility",
    "jpeg_incompressibility",
    "group_rank",
    "group_normalized",
    "pairwise_winrate",
    "clip_score",
)


def make_inputs(folder: Path, rows: int) -> tuple[Path, Path, Path]:
    """(manifest, scores, scores of a second run) for ``rows`` samples in ``folder``."""
    rng = np.random.default_rng(0)
    for k in range(20):
        Image.fromarray((rng.random((256, 256, 3)) * 255 * (k + 1) / 20).astype(np.uint8)).save(folder / f"img{k}.png")
    base = rng.normal(size=rows)
    columns = {name: base * (j + 1) + rng.normal(size=rows) for j, name in enumerate(NAMES)}
    columns["jpeg_compressibility"] = -np.abs(columns["jpeg_compressibility"])
    columns["jpeg_incompressibility"] = np.abs(columns["jpeg_incompressibility"])
    columns["clip_score"] = np.clip(np.abs(columns["clip_score"]) / 3, 0, 2.5)
    columns["clip_score"][::10] = np.nan
    other = {name: values + 0.05 + 0.3 * rng.normal(size=rows) for name, values in columns.items()}
    with (folder / "manifest.jsonl").open("w") as fh:
        for i in range(rows):
            fh.write(
                json.dumps(
                    {
                        "image": f"img{i % 20}.png",
                        "prompt": f"prompt {i // 8}",
                        "dataset": "t2i" if i % 3 else "edit",
                        "group_id": i // 8,
                    }
                )
                + "\n"
            )
    for path, cols in ((folder / "scores.jsonl", columns), (folder / "scores_b.jsonl", other)):
        with path.open("w") as fh:
            for i in range(rows):
                rewards = {n: None if np.isnan(v[i]) else float(v[i]) for n, v in cols.items()}
                applied = [n for n, v in rewards.items() if v is not None]
                fh.write(
                    json.dumps({"rewards": rewards, "total": sum(rewards[n] for n in applied), "applied": applied})
                    + "\n"
                )
    return folder / "manifest.jsonl", folder / "scores.jsonl", folder / "scores_b.jsonl"


def json_numpy_summary(*paths: Path) -> None:
    """The baseline: json.loads per line, then mean / std / quantiles of each reward's non-null scores."""
    for path in paths:
        columns: dict[str, list[float]] = {}
        with path.open() as fh:
            for line in fh:
                for name, value in json.loads(line)["rewards"].items():
                    columns.setdefault(name, []).append(np.nan if value is None else value)
        for values in columns.values():
            x = np.asarray(values)
            x = x[~np.isnan(x)]
            np.mean(x), np.std(x), np.quantile(x, (0, 0.05, 0.25, 0.5, 0.75, 0.95, 1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from rewardzoo.report import build_report

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifest, scores, other = make_inputs(folder, args.rows)
        plain, compared = folder / "plain.html", folder / "compare.html"
        medians, ratios = interleaved(
            {
                "baseline": lambda: json_numpy_summary(scores),
                "report": lambda: build_report(scores, manifest=manifest, out=plain),
            },
            args.repeats,
        )
        c_medians, c_ratios = interleaved(
            {
                "baseline": lambda: json_numpy_summary(scores, other),
                "report": lambda: build_report(scores, manifest=manifest, compare=other, out=compared),
            },
            args.repeats,
        )
        size, c_size = plain.stat().st_size / 1e6, compared.stat().st_size / 1e6
    rows = f"{args.rows:,} rows"
    print("| measurement | baseline | rewardzoo | ratio |")
    print("|---|---|---|---|")
    print(
        f"| report, {rows} + manifest | json + NumPy summary {medians['baseline']:.2f} s | "
        f"{medians['report']:.2f} s | {ratios['report']:.1f}x |"
    )
    print(
        f"| report --compare, {rows} | json + NumPy summary of both {c_medians['baseline']:.2f} s | "
        f"{c_medians['report']:.2f} s | {c_ratios['report']:.1f}x |"
    )
    print(f"| HTML size | | {size:.2f} MB (compare: {c_size:.2f} MB) | |")
    workload = f"{rows}, 6 rewards (one 10 % null), 2 datasets, groups of 8, manifest of 256x256 PNGs, --top 8"
    notes = f"median of {args.repeats} interleaved runs after a warm-up; ratio: median of per-run ratios"
    write_results(
        __file__,
        [
            figure(
                "report.build.plain",
                f"`rewardzoo report` with --manifest, {workload}, vs reading the score file "
                "with json.loads and a NumPy summary per reward",
                measure("build_report", medians["report"], "s"),
                baseline=measure("json + NumPy summary", medians["baseline"], "s"),
                ratio=ratios["report"],
                ratio_label="report / json summary",
                goal="< 30 s",
                notes=notes,
            ),
            figure(
                "report.build.compare",
                f"`rewardzoo report` with --manifest and --compare (1,000 bootstrap "
                f"resamples per reward), {workload}, vs reading both score files the same way",
                measure("build_report --compare", c_medians["report"], "s"),
                baseline=measure("json + NumPy summary of both", c_medians["baseline"], "s"),
                ratio=c_ratios["report"],
                ratio_label="report / json summary",
                goal="< 30 s",
                notes=notes,
            ),
            figure(
                "report.size.plain", f"HTML size of the report, {workload}", measure("HTML", size, "MB"), goal="< 20 MB"
            ),
            figure(
                "report.size.compare",
                f"HTML size of the --compare report, {workload}",
                measure("HTML", c_size, "MB"),
                goal="< 20 MB",
            ),
        ],
    )


if __name__ == "__main__":
    main()
