"""The agreement section of a report (``rewardzoo report --agreement DIR/agreement.json``, or ``rewardzoo report DIR``
on a ``rewardzoo evaluate --out`` folder; ``rewardzoo evaluate --report``): a table of each reward's agreement with
the human judgements (value, 95% interval, items, the published figure) and a plot of the rewards side by side."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import ReportInputError
from .page import esc, num, table, text_cell
from .plots import _figure, _svg

#: What a reward's entry of ``agreement.json`` must hold for the section.
REWARD_KEYS = ("reward", "metric", "value", "ci_low", "ci_high", "n", "published", "categories")


def read_agreement(path: str | os.PathLike) -> dict[str, Any]:
    """The ``agreement.json`` ``rewardzoo evaluate`` wrote (:meth:`EvaluateRun.as_dict`), checked; a
    :class:`ReportInputError` naming the file (and the reward entry) when it is not one."""
    import json

    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportInputError(f"cannot read it ({exc.strerror or exc})", path=path) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ReportInputError(f"not JSON ({exc})", path=path) from None
    missing = [k for k in ("data", "format", "rule", "benchmark", "unit", "rewards") if not isinstance(result, dict)
               or k not in result]  # fmt: skip
    if missing or not isinstance(result["rewards"], list):
        raise ReportInputError(
            f"not the agreement.json of `rewardzoo evaluate` (missing {', '.join(missing) or 'a rewards list'})",
            path=path,
        )
    for i, entry in enumerate(result["rewards"]):
        lacking = [k for k in REWARD_KEYS if not isinstance(entry, dict) or k not in entry]
        if lacking:
            raise ReportInputError(f"rewards[{i}] lacks {', '.join(lacking)}", path=path)
        for key in ("value", "ci_low", "ci_high"):
            if entry[key] is None:
                entry[key] = math.nan
    return result


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
