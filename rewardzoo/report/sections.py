"""The report's sections, each rendered from a :class:`ReportContext` into an HTML fragment."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..spec.sample import Sample
from .inputs import ManifestRows, RewardMeta, finite_range
from .media import MediaEmbedder, describe_limits, sample_text
from .page import anchor, esc, fmt, num, table, text_cell
from .plots import MAX_SCATTER_POINTS, correlation_heatmap, group_spread_histogram, histogram, paired_scatter
from .scores import ScoreTable
from .stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    INSEPARABLE_REL,
    QUANTILE_LABELS,
    QUANTILES,
    best_and_worst,
    disagreements,
    group_spread,
    paired_bootstrap,
    spearman_matrix,
    summarize,
)

#: Reward pairs shown in the disagreement section, and samples per direction (at most ``--top``).
DISAGREEMENT_PAIRS = 3
DISAGREEMENT_SAMPLES = 4
NO_DATASET = "(no dataset)"


@dataclass
class Comparison:
    """A second score file matched row by row to the first: ``rows_a[i]`` and ``rows_b[i]`` are one sample."""

    scores: ScoreTable
    rows_a: np.ndarray
    rows_b: np.ndarray
    how: str


@dataclass
class ReportContext:
    scores: ScoreTable
    metas: list[RewardMeta]
    manifest: ManifestRows | None
    config_label: str | None
    top: int
    embedder: MediaEmbedder
    comparison: Comparison | None = None

    def sample(self, row: int) -> Sample | None:
        return self.manifest.samples[row] if self.manifest is not None else None

    def row_id(self, row: int) -> Any:
        """The row's id: the score file's, else the manifest's; None when neither has ids."""
        if self.scores.ids is not None:
            return self.scores.ids[row]
        return self.manifest.ids[row] if self.manifest is not None else None

    def __post_init__(self) -> None:
        self._labels = (
            np.array([_dataset_label(d) for d in self.manifest.datasets], dtype=object)
            if self.manifest is not None
            else None
        )

    def datasets(self, rows: np.ndarray) -> list[str]:
        """The datasets of ``rows`` in order of first appearance (empty without a manifest)."""
        if self._labels is None:
            return []
        return list(dict.fromkeys(self._labels[rows]))

    def dataset_mask(self, label: str) -> np.ndarray:
        return np.asarray(self._labels == label)

    def reward_anchor(self, i: int) -> str:
        return anchor("reward", i, self.metas[i].name)


def _dataset_label(d: object) -> str:
    return NO_DATASET if d is None else str(d)


# ------------------------------------------------------------------------------------------- header
def header(ctx: ReportContext, versions: dict[str, str], date: str) -> str:
    s, m = ctx.scores, ctx.manifest
    facts = [
        ("scores", str(s.path)),
        ("manifest", str(m.path) if m else "not given (no media, prompts or datasets)"),
        ("config", ctx.config_label or "not given (reward facts from the registry by name)"),
        ("rows", f"{len(s):,}"),
        ("rewards", str(len(s.names))),
    ]
    if m is not None:
        counts: dict[str, int] = {}
        for d in m.datasets:
            counts[_dataset_label(d)] = counts.get(_dataset_label(d), 0) + 1
        facts.append(("datasets", ", ".join(f"{k} ({v:,})" for k, v in counts.items())))
        if m.groups is not None:
            facts.append(
                (
                    "groups",
                    f"{int(np.unique(m.groups[m.groups >= 0]).size):,} (rows with a group_id: "
                    f"{int((m.groups >= 0).sum()):,})",
                )
            )
    if ctx.comparison is not None:
        facts.append(("compared with", f"{ctx.comparison.scores.path} (rows matched {ctx.comparison.how})"))
    total = summarize(s.total)
    facts.append(("total", f"mean {fmt(total.mean)}, std {fmt(total.std)} over {total.n:,} rows with a total"))
    facts.append(("made", f"{date} with " + ", ".join(f"{k} {v}" for k, v in versions.items())))
    meta_rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    rows = []
    for i, meta in enumerate(ctx.metas):
        scored = int((~np.isnan(s.values[meta.name])).sum())
        info = meta.info
        rows.append(
            [
                f'<td><a href="#{ctx.reward_anchor(i)}">{esc(meta.name)}</a></td>',
                text_cell(meta.reward_model),
                text_cell(finite_range(meta.score_range)),
                text_cell(("higher" if meta.higher_is_better else "lower") if info else "higher (assumed)"),
                text_cell(info.modality if info else "unknown"),
                num(int(s.applied[meta.name].sum())),
                num(scored),
                text_cell(info.summary if info else "no registry record for this name"),
            ]
        )
    columns = ["reward", "reward model", "score range", "better", "modality", "applied", "scored", "what it scores"]
    rewards = table(columns, rows, numeric_from=99)
    return (
        f'<h1>Reward report</h1><p class="muted">What was scored, and how each reward behaved on it.</p>'
        f'<table class="facts">{meta_rows}</table><h3>Rewards</h3>{rewards}'
    )


# ------------------------------------------------------------------------------------------ rewards
def _sample_card(ctx: ReportContext, row: int, scores: list[tuple[str, float]]) -> str:
    line = int(ctx.scores.lines[row])
    where = f"line {line}"
    sample = ctx.sample(row)
    if ctx.manifest is not None:
        mline = ctx.manifest.lines[row]
        where = f"line {line}" if mline == line else f"score line {line}, manifest line {mline}"
        if sample is not None and sample.dataset is not None:
            where += f" · {esc(sample.dataset)}"
    key = ctx.row_id(row)
    if key is not None:
        where = f"id {esc(json.dumps(key))} · {where}"
    shown = " · ".join(f'{esc(n)} <span class="score">{fmt(v)}</span>' for n, v in scores)
    media = ctx.embedder.fragment(row, sample)
    data_id = f' data-id="{esc(json.dumps(key))}"' if key is not None else ""
    return (
        f'<figure class="sample" data-row="{row}" data-line="{line}"{data_id}><div class="media">{media}</div>'
        f'<figcaption>{shown}<br><span class="muted">{where}</span></figcaption>'
        f"{sample_text(sample)}</figure>"
    )


def _stats_rows(ctx: ReportContext, meta: RewardMeta, subsets: list[tuple[str, np.ndarray]]) -> list[list[str]]:
    x, applied = ctx.scores.values[meta.name], ctx.scores.applied[meta.name]
    rows = []
    for label, mask in subsets:
        summary = summarize(x[mask])
        quantiles = summary.quantiles or (None,) * len(QUANTILES)
        rows.append(
            [
                text_cell(label),
                num(int(applied[mask].sum())),
                num(summary.n),
                num(summary.mean),
                num(summary.std),
                *(num(q) for q in quantiles),
            ]
        )
    return rows


def reward_section(ctx: ReportContext, index: int) -> str:
    meta = ctx.metas[index]
    x = ctx.scores.values[meta.name]
    scored = ~np.isnan(x)
    n = int(scored.sum())
    direction = "higher is better" if meta.higher_is_better else "lower is better"
    about = (
        f"{esc(meta.info.summary.rstrip('.'))}. Score range {finite_range(meta.score_range)}, {direction}."
        if meta.info
        else "No registry record: higher is assumed better, the score range is unknown."
    )
    head = (
        f'<section class="reward" id="{ctx.reward_anchor(index)}" data-reward="{esc(meta.name)}">'
        f"<h2>{esc(meta.name)}</h2><p>{about}</p>"
    )
    if n == 0:
        applied = int(ctx.scores.applied[meta.name].sum())
        return (
            head + f'<p class="note">No sample was scored by this reward ({applied:,} of {len(x):,} rows list it '
            "as applied): no statistics, histogram or samples.</p></section>"
        )
    datasets = ctx.datasets(np.flatnonzero(scored))
    subsets = [("all", np.ones(len(x), bool))]
    if len(datasets) > 1:
        subsets += [(d, ctx.dataset_mask(d)) for d in datasets]
    header = ["rows", "applied", "scored", "mean", "std", *QUANTILE_LABELS]
    parts = [head, table(header, _stats_rows(ctx, meta, subsets), css="stats")]
    values = x[scored]
    if np.ptp(values) == 0:
        parts.append(
            f'<p class="note">All {n:,} scores are equal ({fmt(float(values[0]))}): the histogram has one bin '
            "and the samples below cannot be ranked (they are shown in row order).</p>"
        )
    if meta.score_range is not None:
        lo, hi = meta.score_range
        outside = int(((values < lo) | (values > hi)).sum())
        if outside:
            parts.append(
                f'<p class="note">{outside:,} score(s) lie outside the declared range '
                f"{finite_range(meta.score_range)}: is the config right for this file?</p>"
            )
    listed = ctx.scores.applied[meta.name]
    if (listed & ~scored).any():
        parts.append(
            f'<p class="note">{int((listed & ~scored).sum()):,} row(s) list this reward as applied but have '
            "a null score; they are left out of the statistics.</p>"
        )
    if (scored & ~listed).any():
        parts.append(
            f'<p class="note">{int((scored & ~listed).sum()):,} row(s) have a score but do not list this '
            "reward as applied; their scores are counted.</p>"
        )
    series = {d: x[ctx.dataset_mask(d) & scored] for d in datasets} if len(datasets) > 1 else {"all": values}
    parts.append(
        f'<div class="charts"><figure>{histogram(series, meta.name)}'
        f"<figcaption>Histogram of the {n:,} scores"
        + (" per dataset (shared bins)" if len(series) > 1 else "")
        + "</figcaption></figure></div>"
    )
    best, worst = best_and_worst(x, meta.sign, ctx.top)
    for title, rows in ((f"Best {len(best)}", best), (f"Worst {len(worst)}", worst)):
        if rows:
            cards = "".join(_sample_card(ctx, r, [("score", float(x[r]))]) for r in rows)
            which = "best" if title.startswith("Best") else "worst"
            parts.append(
                f'<h3>{title} <span class="muted">({direction})</span></h3>'
                f'<div class="samples" data-kind="{which}">{cards}</div>'
            )
    return "".join(parts) + "</section>"


# -------------------------------------------------------------------------------------- correlation
def _rankable(values: np.ndarray) -> bool:
    scored = values[~np.isnan(values)]
    return scored.size >= 3 and np.ptp(scored) > 0


def _unrankable(values: np.ndarray) -> str:
    """Why a reward's scores cannot be ranked: too few, or all equal (a constant reward)."""
    scored = values[~np.isnan(values)]
    if scored.size < 3:
        return f"{scored.size} score{'s' * (scored.size != 1)}, fewer than 3"
    return f"constant, every score {scored[0]:.6g}"


def _correlated(ctx: ReportContext) -> list[int]:
    return [i for i, m in enumerate(ctx.metas) if _rankable(ctx.scores.values[m.name])]


def correlation_section(ctx: ReportContext) -> tuple[str, np.ndarray, list[int]]:
    """The Spearman section, the matrix and the indices (into ``metas``) it covers."""
    keep = _correlated(ctx)
    head = '<section id="correlation"><h2>Rank correlation between rewards</h2>'
    if len(keep) < 2:
        why = "; ".join(
            f"{m.name}: {_unrankable(ctx.scores.values[m.name])}" for i, m in enumerate(ctx.metas) if i not in keep
        )
        return (
            head
            + f'<p class="note">Fewer than two rewards can be ranked ({esc(why or f"{len(ctx.metas)} in the scores")}): nothing to '
            "correlate.</p></section>",
            np.zeros((0, 0)),
            keep,
        )
    names = [ctx.metas[i].name for i in keep]
    left_out = [m.name for i, m in enumerate(ctx.metas) if i not in keep]
    if left_out:
        head += (
            f'<p class="note">Left out (fewer than 3 scores, or all equal: nothing to rank): '
            f"{esc(', '.join(left_out))}.</p>"
        )
    rho, count = spearman_matrix([ctx.scores.values[n] for n in names])
    rows = []
    for i, name in enumerate(names):
        rows.append(
            [text_cell(name)]
            + [
                num(float(rho[i, j]), 3) if not np.isnan(rho[i, j]) else '<td class="num" data-value="">n/a</td>'
                for j in range(len(names))
            ]
        )
    counts = [[text_cell(name)] + [num(int(count[i, j])) for j in range(len(names))] for i, name in enumerate(names)]
    return (
        head + "<p>Spearman's rho over the rows both rewards scored (raw scores, not oriented: a lower-is-better "
        "reward correlates negatively with a higher-is-better one that agrees with it). n/a: fewer than 3 common "
        "rows, or a reward constant on them.</p>"
        f'<div class="charts"><figure>{correlation_heatmap(names, rho)}</figure></div>'
        + table(["rho", *names], rows, css="spearman")
        + "<h3>Rows scored by both</h3>"
        + table(["n", *names], counts, css="pair-counts")
        + "</section>",
        rho,
        keep,
    )


def disagreement_section(ctx: ReportContext, rho: np.ndarray, keep: list[int]) -> str:
    head = '<section id="disagreement"><h2>Where rewards disagree</h2>'
    pairs = []
    for a in range(len(keep)):
        for b in range(a + 1, len(keep)):
            if not np.isnan(rho[a, b]):
                ma, mb = ctx.metas[keep[a]], ctx.metas[keep[b]]
                pairs.append((rho[a, b] * ma.sign * mb.sign, ma, mb))
    if not pairs:
        return head + '<p class="note">No pair of rewards with a rank correlation: nothing to compare.</p></section>'
    pairs.sort(key=lambda p: p[0])
    k = min(ctx.top, DISAGREEMENT_SAMPLES)
    parts = [
        head,
        f"<p>The {min(len(pairs), DISAGREEMENT_PAIRS)} pair(s) of rewards that agree least (lowest "
        "Spearman rho once both are oriented so that higher is better), and for each the rows ranked "
        f"high by one and low by the other: up to {k} per direction, by the gap between the two "
        "percentile ranks over the rows both scored.</p>",
    ]
    for oriented, ma, mb in pairs[:DISAGREEMENT_PAIRS]:
        xa, xb = ctx.scores.values[ma.name], ctx.scores.values[mb.name]
        high_a, high_b = disagreements(xa, xb, ma.sign, mb.sign, k)
        parts.append(
            f'<h3>{esc(ma.name)} vs {esc(mb.name)} <span class="muted">(oriented rho {oriented:.3f})</span>'
            '</h3><div class="pair">'
        )
        for label, rows in (
            (f"good on {ma.name}, bad on {mb.name}", high_a),
            (f"good on {mb.name}, bad on {ma.name}", high_b),
        ):
            cards = "".join(_sample_card(ctx, r, [(ma.name, float(xa[r])), (mb.name, float(xb[r]))]) for r in rows)
            parts.append(
                f"<div><p><b>{esc(label)}</b></p>"
                + (f'<div class="samples">{cards}</div>' if rows else '<p class="note">none</p>')
                + "</div>"
            )
        parts.append("</div>")
    return "".join(parts) + "</section>"


# ------------------------------------------------------------------------------------------- groups
def groups_section(ctx: ReportContext) -> str:
    groups = ctx.manifest.groups if ctx.manifest is not None else None
    if groups is None:  # (the report adds this section only for a manifest with groups)
        return ""
    rel = INSEPARABLE_REL
    rows, charts = [], []
    for meta in ctx.metas:
        spread = group_spread(ctx.scores.values[meta.name], groups)
        if spread.stds.size == 0:
            rows.append([text_cell(meta.name), num(0), num(spread.skipped)] + ['<td class="num">—</td>'] * 4)
            continue
        rows.append(
            [
                text_cell(meta.name),
                num(int(spread.stds.size)),
                num(spread.skipped),
                num(float(np.mean(spread.stds))),
                num(float(np.median(spread.stds))),
                num(spread.threshold),
                num(spread.fraction_inseparable),
            ]
        )
        charts.append(
            f"<figure>{group_spread_histogram(spread.stds, spread.threshold, 'within-group std')}"
            f"<figcaption>{esc(meta.name)}: {spread.stds.size:,} groups</figcaption></figure>"
        )
    return (
        '<section id="groups"><h2>Groups</h2>'
        "<p>Groupwise training (GRPO) learns only from differences within a group. Per reward: the standard "
        "deviation of the scores within each group (population std, groups with at least two scored members), "
        f"and the fraction of groups the reward <b>cannot separate</b>: max − min within the group ≤ {rel:g} × "
        "the reward's overall std (the threshold column). Single-scored groups are counted apart.</p>"
        + table(
            ["reward", "groups", "single-scored", "mean std", "median std", "threshold", "inseparable"],
            rows,
            css="groups",
        )
        + f'<div class="charts">{"".join(charts)}</div></section>'
    )


# ------------------------------------------------------------------------------------------ compare
def compare_section(ctx: ReportContext) -> str:
    comp = ctx.comparison
    if comp is None:  # (the report adds this section only with a comparison)
        return ""
    b = comp.scores
    names_b = set(b.names)
    common = [m for m in ctx.metas if m.name in names_b]
    only_a = [m.name for m in ctx.metas if m.name not in names_b]
    only_b = [n for n in b.names if n not in {m.name for m in ctx.metas}]
    rows, charts = [], []
    for meta in common:
        xa = ctx.scores.values[meta.name][comp.rows_a]
        xb = b.values[meta.name][comp.rows_b]
        paired = paired_bootstrap(xa, xb, meta.sign)
        if paired is None:
            rows.append([text_cell(meta.name), num(0)] + ['<td class="num">—</td>'] * 8)
            continue
        both = ~np.isnan(xa) & ~np.isnan(xb)
        rows.append(
            [
                text_cell(meta.name),
                num(paired.n),
                num(float(xa[both].mean())),
                num(float(xb[both].mean())),
                num(paired.mean_diff),
                num(paired.mean_diff_ci[0]),
                num(paired.mean_diff_ci[1]),
                num(paired.win_rate),
                num(paired.win_rate_ci[0]),
                num(paired.win_rate_ci[1]),
            ]
        )
        charts.append(
            f"<figure>{paired_scatter(xa[both], xb[both], meta.name, meta.name)}"
            f"<figcaption>{esc(meta.name)}: {paired.n:,} pairs"
            + (f" ({MAX_SCATTER_POINTS:,} drawn at random)" if paired.n > MAX_SCATTER_POINTS else "")
            + "</figcaption></figure>"
        )
    notes = []
    if only_a:
        notes.append(f"only in A, not compared: {', '.join(only_a)}")
    if only_b:
        notes.append(f"only in B, not compared: {', '.join(only_b)}")
    lo, hi = 50 * (1 - CONFIDENCE), 100 - 50 * (1 - CONFIDENCE)
    return (
        '<section id="compare"><h2>Compare: B against A</h2>'
        f"<p>A is <code>{esc(ctx.scores.path.name)}</code>, B is <code>{esc(b.path.name)}</code>; rows matched "
        f"{esc(comp.how)}, pairs where both scored. Mean difference is B − A. Win rate of B: the fraction of pairs "
        "where B is better in the reward's direction (ties count one half). Intervals: "
        f"{CONFIDENCE:.0%} percentile bootstrap ({lo:g}th and {hi:g}th percentiles) of "
        f"{BOOTSTRAP_RESAMPLES:,} resamples of the pairs, seed {BOOTSTRAP_SEED} (a fresh generator "
        "per reward).</p>"
        + "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
        + table(
            ["reward", "pairs", "mean A", "mean B", "B − A", "CI low", "CI high", "win rate B", "CI low", "CI high"],
            rows,
            css="compare",
        )
        + f'<div class="charts">{"".join(charts)}</div></section>'
    )


# ------------------------------------------------------------------------------------------- method
def method_section(ctx: ReportContext) -> str:
    e = ctx.embedder
    media = (
        (
            f"{e.placed:,} media placed ({e.used / 1e6:.1f} MB)"
            + (f", {e.over_budget:,} left out past the budget" if e.over_budget else "")
            + (f", {e.failed:,} could not be read (noted at the sample)" if e.failed else "")
        )
        if ctx.manifest
        else "no manifest given: samples are listed by line, without media or prompts"
    )
    return (
        '<section id="method"><h2>How this report is computed</h2><ul>'
        "<li>Statistics use every scored row (null scores are left out): std is the population std (ddof=0), "
        "quantiles are NumPy's linear interpolation. Histograms use about √n shared bins (5 to 50), one bin "
        "when all scores are equal.</li>"
        f"<li>Best and worst samples: the top {ctx.top} and bottom {ctx.top} scored rows in the reward's "
        "direction, ties in row order; with fewer than twice as many scores, the best get the larger half (the "
        "two lists never share a row).</li>"
        f"<li>Media: {esc(describe_limits(e.budget))} This page: {esc(media)}.</li>"
        "<li>The exact value of every number in a table is in its cell's <code>data-value</code> attribute.</li>"
        "</ul></section>"
    )
