"""The agreement section of a report (``rewardzoo evaluate --report``): a table of each reward's agreement with the
human judgements (value, 95% interval, items, the published figure) and a plot of the rewards side by side."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .page import document, esc, num, table, text_cell
from .plots import _figure, _svg


def agreement_plot(rewards: list[Mapping[str, Any]], metric: str) -> str:
    """Each reward's value with its interval as a horizontal bar, its published figure as a marker."""
    names = [r["reward"] for r in rewards]
    with _figure(6.0, 0.6 + 0.35 * len(names)) as fig:
        ax = fig.add_subplot()
        y = list(range(len(names)))[::-1]
        values = [r["value"] for r in rewards]
        err = [
            [max(0.0, r["value"] - r["ci_low"]) if not math.isnan(r["ci_low"]) else 0.0 for r in rewards],
            [max(0.0, r["ci_high"] - r["value"]) if not math.isnan(r["ci_high"]) else 0.0 for r in rewards],
        ]
        ax.barh(y, values, xerr=err, color="#4c78a8", capsize=3, label="measured (95% CI)")
        shown = [
            (yy, p[0]["value"])
            for yy, r in zip(y, rewards)
            if (p := [x for x in r["published"] if x["metric"] == metric])
        ]
        if shown:
            ax.scatter(
                [v for _, v in shown], [yy for yy, _ in shown], marker="D", color="#e45756", zorder=3, label="published"
            )
        ax.set_yticks(y, names)
        ax.set_xlabel(metric)
        ax.legend(loc="lower right", fontsize=7)
        return _svg(fig)


def agreement_section(result: Mapping[str, Any]) -> str:
    """The section's HTML from :meth:`~rewardzoo.jobs.evaluation.run.EvaluateRun.as_dict`."""
    rewards = result["rewards"]
    rows = []
    for r in rewards:
        pub = next((p for p in r["published"] if p["metric"] == r["metric"]), None)
        rows.append(
            [
                text_cell(r["reward"]),
                text_cell(r["metric"]),
                num(r["value"]),
                num(r["ci_low"]),
                num(r["ci_high"]),
                num(r["n"]),
                num(pub["value"]) if pub else num(None),
                text_cell(pub["source"] if pub else r.get("note", "")),
            ]
        )
        for c in r["categories"]:
            rows.append(
                [text_cell(f"  {c['category']}"), text_cell(""), num(c["value"]), num(c["ci_low"]),
                 num(c["ci_high"]), num(c["n"]), num(None), text_cell("")]
            )  # fmt: skip
    header = ["reward", "metric", "value", "CI low", "CI high", f"n {result['unit']}s", "published", "source / note"]
    metric = rewards[0]["metric"] if rewards else ""
    return (
        '<section id="agreement"><h2>Agreement with human judgements</h2>'
        f"<p>{esc(result['data'])} read as <code>{esc(result['format'])}</code> (rule <code>{esc(result['rule'])}"
        f"</code>, benchmark <code>{esc(result['benchmark'])}</code>); 95% percentile bootstrap intervals.</p>"
        + table(header, rows, numeric_from=2)
        + (agreement_plot(rewards, metric) if rewards else "")
        + "</section>"
    )


def write_agreement_report(result: Mapping[str, Any], out: str | os.PathLike) -> Path:
    """A self-contained HTML page holding the agreement section."""
    path = Path(out)
    header = f"<h1>rewardzoo evaluate</h1><p>{esc(result['data'])}</p>"
    page = document("rewardzoo evaluate", header, [("agreement", "Agreement")], [agreement_section(result)])
    path.write_text(page, encoding="utf-8")
    return path
