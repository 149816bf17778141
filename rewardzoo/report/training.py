"""The report of a training log (the JSONL a :class:`~rewardzoo.monitor.RewardMonitor` writes).

``rewardzoo report monitor.jsonl`` recognises the log by its lines and builds, in the same self-contained page
as the score report (inline SVG, no script, no external reference): per reward, its mean over the steps with
the p25-p75 band, train and eval on one chart, the steps of the alarms that name it; the alarms on a
timeline and in a table; the trends and proxy/gold divergences; and the groups that turned inseparable —
for each, the first step at which a reward could not tell its members apart, and on how many logged steps.
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from ..monitor.log import MonitorLog
from ..shared.score_stats import INSEPARABLE_REL
from .page import anchor, document, esc, num, table, text_cell

SPLITS = ("train", "eval")
#: Groups listed per reward in the inseparable-groups table.
MAX_GROUP_ROWS = 30


def render_training(log: MonitorLog, versions: dict[str, str]) -> str:
    """The whole page of ``log``."""
    names = list(dict.fromkeys([*log.rewards("train"), *log.rewards("eval")]))
    nav = [(anchor("curve", i, n), n) for i, n in enumerate(names)]
    sections = [_alarms(log)]
    nav.insert(0, ("alarms", "alarms"))
    sections += [_curve_section(log, i, n) for i, n in enumerate(names)]
    trend = _trends(log)
    if trend:
        sections.append(trend)
        nav.append(("trends", "proxy vs gold"))
    sections.append(_groups(log))
    nav.append(("groups", "inseparable groups"))
    date = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return document(f"rewardzoo training report: {log.path.name}", _header(log, versions, date), nav, sections)


def _header(log: MonitorLog, versions: dict[str, str], date: str) -> str:
    steps = sorted({s for steps, _ in log.series.values() for s in steps})
    facts = [
        ("log", str(log.path)),
        ("lines", f"{log.lines:,}"),
        ("steps", f"{steps[0]} to {steps[-1]} ({len(steps):,} logged)" if steps else "none"),
        ("train rewards", ", ".join(log.rewards("train")) or "none"),
        ("eval rewards", ", ".join(log.rewards("eval")) or "none"),
        ("alarms", f"{len(log.alarms):,}"),
        ("made", f"{date} with " + ", ".join(f"{k} {v}" for k, v in versions.items())),
    ]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    return (
        '<h1>Training report</h1><p class="muted">How the rewards moved during training, and the signs '
        f'of reward hacking the monitor raised.</p><table class="facts">{rows}</table>'
    )


def _arrays(log: MonitorLog, split: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    steps, values = log.get(split, metric)
    return np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64)


def _alarm_steps(log: MonitorLog, reward: str) -> list[int]:
    return [a.step for a in log.alarms if reward in a.name.split("/")]


def _curve_section(log: MonitorLog, index: int, name: str) -> str:
    from .plots import step_curves

    series, rows = {}, []
    for split in SPLITS:
        steps, mean = _arrays(log, split, f"{split}/{name}/mean")
        if steps.size == 0:
            continue
        lo_steps, lo = _arrays(log, split, f"{split}/{name}/p25")
        hi_steps, hi = _arrays(log, split, f"{split}/{name}/p75")
        band = lo_steps.size == steps.size == hi_steps.size
        series[f"{split} mean" + (" (p25-p75 band)" if band else "")] = (
            steps,
            mean,
            lo if band else None,
            hi if band else None,
        )
        last = {k: log.get(split, f"{split}/{name}/{k}")[1] for k in ("std", "saturation", "inseparable")}
        rows.append(
            [
                text_cell(split),
                num(int(steps.size)),
                num(float(mean[0])),
                num(float(mean[-1])),
                num(float(mean.max())),
                num(float(mean.min())),
            ]
            + [num(v[-1] if v else None) for v in last.values()]
        )
    chart = step_curves(series, name, alarms=_alarm_steps(log, name))
    return (
        f'<section id="{anchor("curve", index, name)}"><h2>{esc(name)}</h2>'
        f'<div class="charts"><figure>{chart}<figcaption>mean per step; red dashes: alarms naming '
        f"{esc(name)}</figcaption></figure></div>"
        + table(
            [
                "split",
                "steps",
                "first mean",
                "last mean",
                "max mean",
                "min mean",
                "last std",
                "last saturation",
                "last inseparable",
            ],
            rows,
        )
        + "</section>"
    )


def _alarms(log: MonitorLog) -> str:
    from .plots import alarm_timeline

    if not log.alarms:
        return (
            '<section id="alarms"><h2>Alarms</h2><p>No alarm was raised: no saturation, inseparable groups, '
            "conflicting rewards or proxy/gold divergence past the configured thresholds.</p></section>"
        )
    steps = [s for steps, _ in log.series.values() for s in steps]
    chart = alarm_timeline([a.name for a in log.alarms], [a.step for a in log.alarms], (min(steps), max(steps)))
    rows = [
        [num(a.step), text_cell(a.split), text_cell(a.name), num(a.value), num(a.threshold), text_cell(a.message)]
        for a in log.alarms
    ]
    return (
        '<section id="alarms"><h2>Alarms</h2><p>Each alarm is raised at the step its condition starts to '
        "hold (see the monitor's thresholds).</p>"
        f'<div class="charts"><figure>{chart}<figcaption>alarms over the steps</figcaption></figure></div>'
        + table(["step", "split", "alarm", "value", "threshold", "what it means"], rows, numeric_from=99)
        + "</section>"
    )


def _trends(log: MonitorLog) -> str:
    from .plots import step_curves

    metrics = [m for (split, m) in log.series if m.startswith("divergence/")]
    if not metrics:
        return ""
    charts = []
    for metric in dict.fromkeys(metrics):
        reward = metric.split("/", 1)[1]
        series = {}
        for split in SPLITS:
            for name, label in (
                (metric, "divergence"),
                ("trend/train_total", "train total trend"),
                (f"trend/eval/{reward}", f"{reward} trend"),
            ):
                steps, values = _arrays(log, split, name)
                if steps.size and label not in series:
                    series[label] = (steps, values, None, None)
        alarms = [a.step for a in log.alarms if a.name == metric]
        charts.append(
            f"<figure>{step_curves(series, 'std over the window', alarms=alarms, hline=0.0)}"
            f"<figcaption>{esc(reward)}: proxy (train total) vs gold</figcaption></figure>"
        )
    return (
        '<section id="trends"><h2>Proxy vs gold</h2><p>Trends are the least-squares slope of the per-step '
        "mean over the monitor's window, in per-sample standard deviations; the divergence is the smaller "
        "of the train total's rise and the eval reward's fall (positive only while both happen).</p>"
        f'<div class="charts">{"".join(charts)}</div></section>'
    )


def _groups(log: MonitorLog) -> str:
    from .plots import step_curves

    rows, charts = [], []
    for (split, reward), entries in log.inseparable.items():
        first: dict[str, int] = {}
        count: dict[str, int] = {}
        for step, groups in entries:
            for g in groups:
                first.setdefault(g, step)
                count[g] = count.get(g, 0) + 1
        ordered = sorted(first, key=lambda g: (first[g], g))
        for g in ordered[:MAX_GROUP_ROWS]:
            rows.append([text_cell(split), text_cell(reward), text_cell(g), num(first[g]), num(count[g])])
        if len(ordered) > MAX_GROUP_ROWS:
            rows.append(
                [
                    text_cell(split),
                    text_cell(reward),
                    text_cell(f"... and {len(ordered) - MAX_GROUP_ROWS} more"),
                    num(None),
                    num(None),
                ]
            )
    for split in SPLITS:
        series = {}
        for name in log.rewards(split):
            steps, share = _arrays(log, split, f"{split}/{name}/inseparable")
            if steps.size:
                series[name] = (steps, share, None, None)
        if series:
            charts.append(
                f"<figure>{step_curves(series, 'share inseparable')}<figcaption>{split}: share of groups "
                "a reward cannot separate</figcaption></figure>"
            )
    body = (
        table(["split", "reward", "group", "first step", "steps inseparable"], rows, numeric_from=3)
        if rows
        else "<p>No group turned inseparable.</p>"
    )
    return (
        '<section id="groups"><h2>Inseparable groups</h2><p>A group is inseparable at a step when a reward '
        f"gives all its members the same score (max − min ≤ {INSEPARABLE_REL:g} × that step's std, the score "
        "report's definition): a group-relative trainer learns nothing from it.</p>"
        f'<div class="charts">{"".join(charts)}</div>{body}</section>'
    )
