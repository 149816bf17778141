"""Agreement between a reward and human judgements: pairwise accuracy, accuracy with ties, rank correlations,
bootstrap intervals and a paired bootstrap. NumPy only (part of :mod:`rewardzoo.shared`).

Conventions. A *pair* is (score of a) - (score of b) = ``diff`` and a human label ``human`` in {+1 (a
preferred), -1 (b preferred), 0 (tie)}.

- :func:`pair_credit` / :func:`pairwise_accuracy`: over the pairs whose human label is not a tie, a pair scores
  1 when ``sign(diff) == human``, 0 when the signs differ and ``tie_credit`` when ``diff == 0`` (0.5 by
  default: a reward that cannot tell the two apart is right half the time; VideoAlign's "accuracy w/o ties"
  counts a score tie as wrong, ``tie_credit=0``). Human ties are left out and counted apart.
- :func:`accuracy_with_ties`: the tie calibration of Deutsch et al. 2023 ("Ties Matter", arXiv 2305.14324) as
  VideoAlign uses it for VideoGen-RewardBench (arXiv 2501.13918): the model predicts a tie when
  ``|diff| <= eps``; accuracy = (C + Thm) / N over *all* pairs (C: non-tie pairs with the right sign, Thm:
  human tie and predicted tie); ``eps`` is the candidate from ``{|diff_i|}`` that maximises it. VideoAlign's
  loop moves pairs with equal ``|diff|`` one at a time and may report a state no threshold gives; we evaluate
  whole thresholds only, so our figure can be lower than theirs only when several pairs share ``|diff|``.
  With ``zero=True`` the threshold 0 is a candidate as well (Deutsch et al.'s own ``tau_optimization``, which
  t2v_metrics runs for GenAI-Bench, and EditReward-Bench's grid): VideoAlign's loop never scores "no ties".
- :func:`all_pairs`: every pair of rated items (GenAI-Bench's "no grouping" pairs), human label the sign of
  the difference of their mean ratings (equal means: a tie).
- :func:`spearman` (SRCC, Pearson on average ranks), :func:`pearson` (PLCC), :func:`kendall` (KRCC, tau-b),
  as scipy.stats defines them.
- Intervals are percentile bootstrap intervals (``n_resamples`` resamples of the items with replacement, a
  seeded generator). For a mean of per-item values taking few distinct values (accuracy credits), a resample's
  sum is drawn as a multinomial over the distinct values: the same distribution as resampling indices, O(B)
  instead of O(B * n). :func:`paired_bootstrap` resamples the items once for both rewards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Resamples of a bootstrap interval and its level, unless told.
N_RESAMPLES = 1000
LEVEL = 0.95
#: Distinct per-item values up to which a mean's bootstrap is drawn as a multinomial.
_MULTINOMIAL_MAX = 64
#: Resampled items held in memory at once by the index bootstrap.
_CHUNK = 4_000_000


@dataclass(frozen=True)
class Interval:
    """A statistic, its percentile bootstrap interval at ``level`` and the number of items ``n``."""

    value: float
    low: float
    high: float
    n: int
    level: float = LEVEL

    def as_dict(self) -> dict:
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high, "n": self.n, "level": self.level}


@dataclass(frozen=True)
class PairedDifference:
    """Reward A's statistic minus reward B's on the same items, its interval, and ``p_value``: the two-sided
    bootstrap p-value of "no difference" (twice the smaller share of resampled differences on either side of 0,
    capped at 1)."""

    difference: float
    low: float
    high: float
    p_value: float
    n: int
    level: float = LEVEL

    def as_dict(self) -> dict:
        return {
            "difference": self.difference,
            "ci_low": self.low,
            "ci_high": self.high,
            "p_value": self.p_value,
            "n": self.n,
            "level": self.level,
        }


def _labels(human) -> np.ndarray:
    h = np.asarray(human)
    if h.size and not np.isin(h, (-1, 0, 1)).all():
        raise ValueError("human labels must be +1 (a preferred), -1 (b preferred) or 0 (tie)")
    return h.astype(np.int8)


def pair_credit(diff, human, tie_credit: float = 0.5) -> np.ndarray:
    """Per-pair credit of the pairs with a non-tie human label (in order): 1 right sign, 0 wrong sign,
    ``tie_credit`` for ``diff == 0``."""
    d, h = np.asarray(diff, dtype=np.float64), _labels(human)
    if d.shape != h.shape:
        raise ValueError(f"diff and human differ in shape: {d.shape} vs {h.shape}")
    keep = h != 0
    d, h = d[keep], h[keep]
    return np.where(d == 0, tie_credit, (np.sign(d) == h).astype(np.float64))


def pairwise_accuracy(diff, human, tie_credit: float = 0.5) -> float:
    """Mean :func:`pair_credit` (NaN when every pair is a human tie)."""
    credit = pair_credit(diff, human, tie_credit)
    return float(credit.mean()) if credit.size else float("nan")


def accuracy_with_ties(diff, human, *, zero: bool = False) -> tuple[float, float]:
    """(accuracy with ties, the threshold ``eps`` that gives it): see the module docstring. ``zero``: the
    threshold 0 (only exact score ties are ties) is a candidate too, as in Deutsch et al.'s ``tau_optimization``
    (t2v_metrics' GenAI-Bench evaluation) and EditReward-Bench's threshold grid ``[0.0] + sorted(set(|diff|))``."""
    d, h = np.abs(np.asarray(diff, dtype=np.float64)), _labels(human)
    if d.size == 0:
        return float("nan"), 0.0
    right = (h != 0) & (np.sign(np.asarray(diff, dtype=np.float64)) == h)
    eps, inverse = np.unique(d, return_inverse=True)
    right_at = np.bincount(inverse, weights=right, minlength=eps.size)
    tie_at = np.bincount(inverse, weights=h == 0, minlength=eps.size)
    if zero and eps[0] > 0:  # a candidate threshold below every |diff|: no predicted ties
        eps, right_at, tie_at = np.r_[0.0, eps], np.r_[0.0, right_at], np.r_[0.0, tie_at]
    # threshold eps[k]: pairs with |diff| <= eps[k] are predicted ties
    correct = (right.sum() - np.cumsum(right_at)) + np.cumsum(tie_at)
    k = int(np.argmax(correct))
    return float(correct[k] / d.size), float(eps[k])


def credit_with_ties(diff, human, eps: float) -> np.ndarray:
    """Per-pair 0/1 correctness (all pairs) at tie threshold ``eps``."""
    d, h = np.asarray(diff, dtype=np.float64), _labels(human)
    tie = np.abs(d) <= eps
    return np.where(h == 0, tie, ~tie & (np.sign(d) == h)).astype(np.float64)


def accuracy_with_ties_interval(
    diff, human, seed: int = 0, *, n_resamples: int = N_RESAMPLES, level: float = LEVEL, zero: bool = False
) -> Interval:
    """:func:`accuracy_with_ties` and a bootstrap interval of the per-pair correctness at the chosen threshold
    (the threshold is held fixed across resamples, so the interval leaves out its calibration's variance)."""
    acc, eps = accuracy_with_ties(diff, human, zero=zero)
    interval = bootstrap_mean(credit_with_ties(diff, human, eps), n_resamples=n_resamples, level=level, seed=seed)
    return Interval(acc, interval.low, interval.high, interval.n, level)


def all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(i, j): every pair ``i < j`` of ``n`` items, row-major (``n * (n - 1) / 2`` pairs; O(n^2) memory)."""
    i, j = np.triu_indices(n, 1)
    return i.astype(np.int64), j.astype(np.int64)


def ranking_pairs(groups, ranks, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every within-group pair (i < j in input order) as ``(diff, human, group)``: ``diff = s_i - s_j``,
    ``human`` +1 when i has the better (lower) rank, -1 when worse, 0 on equal ranks; ``group`` the pair's group
    index (0-based, in order of first appearance)."""
    g = np.asarray(groups)
    r, s = np.asarray(ranks, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    _, first, code = np.unique(g, return_index=True, return_inverse=True)
    order = np.argsort(first)  # group index by first appearance
    relabel = np.empty_like(order)
    relabel[order] = np.arange(order.size)
    code = relabel[code.reshape(-1)]
    diffs, humans, owners = [], [], []
    members = np.split(np.argsort(code, kind="stable"), np.cumsum(np.bincount(code))[:-1])
    for k, idx in enumerate(members):
        i, j = np.triu_indices(idx.size, 1)
        a, b = idx[i], idx[j]
        diffs.append(s[a] - s[b])
        humans.append(np.sign(r[b] - r[a]).astype(np.int8))
        owners.append(np.full(a.size, k))
    if not diffs:
        return np.zeros(0), np.zeros(0, np.int8), np.zeros(0, np.int64)
    return np.concatenate(diffs), np.concatenate(humans), np.concatenate(owners)


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ties given their average rank (scipy's ``rankdata``)."""
    x = np.asarray(x, dtype=np.float64)
    rows = x.reshape(-1, x.shape[-1])
    _, dense = np.unique(rows, return_inverse=True)  # one code book for all rows: codes keep the order
    dense = dense.reshape(rows.shape).astype(np.int64)
    width = int(dense.max()) + 1 if dense.size else 1
    keyed = dense + np.arange(rows.shape[0])[:, None] * width
    flat = np.sort(keyed, axis=None)
    start = np.arange(rows.shape[0])[:, None] * rows.shape[1]
    left = np.searchsorted(flat, keyed, "left") - start
    right = np.searchsorted(flat, keyed, "right") - start
    return ((left + right + 1) / 2.0).reshape(x.shape)


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    den = np.sqrt((xc * xc).sum(axis=-1) * (yc * yc).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * yc).sum(axis=-1) / np.where(den > 0, den, 1), np.nan)


def pearson(x, y) -> float:
    """PLCC: Pearson's r (NaN when either side is constant)."""
    return float(_pearson_rows(np.asarray(x, np.float64), np.asarray(y, np.float64)))


def spearman(x, y) -> float:
    """SRCC: Pearson's r of the average ranks."""
    return float(_pearson_rows(_average_ranks(x), _average_ranks(y)))


def kendall(x, y) -> float:
    """KRCC: Kendall's tau-b, ``(P - Q) / sqrt((P + Q + X0)(P + Q + Y0))`` over all pairs (blockwise,
    O(n^2) time, O(n * block) memory)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    n = x.size
    concord = untied = ties_x = ties_y = 0.0
    block = max(1, 2_000_000 // max(n, 1))
    for lo in range(0, n, block):
        dx = np.sign(x[lo : lo + block, None] - x[None, :])
        dy = np.sign(y[lo : lo + block, None] - y[None, :])
        concord += float((dx * dy).sum())
        untied += float(((dx != 0) & (dy != 0)).sum())
        ties_x += float(((dx == 0) & (dy != 0)).sum())
        ties_y += float(((dy == 0) & (dx != 0)).sum())
    # ordered pairs: each unordered pair counted twice. P - Q = concord / 2; n0 - n1 = P + Q + (tied in y only)
    den = np.sqrt((untied + ties_y) * (untied + ties_x)) / 2
    return float(concord / 2 / den) if den > 0 else float("nan")


CORRELATIONS: dict[str, Callable[..., float]] = {"srcc": spearman, "plcc": pearson, "krcc": kendall}


def _percentiles(draws: np.ndarray, level: float) -> tuple[float, float]:
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _resampled_means(values: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``n_resamples`` bootstrap means of ``values`` (rows: items; columns: statistics sharing each resample)."""
    n = values.shape[0]
    keys, inverse = np.unique(values, axis=0, return_inverse=True)
    if keys.shape[0] <= _MULTINOMIAL_MAX:
        p = np.bincount(inverse.reshape(-1), minlength=keys.shape[0]) / n
        counts = rng.multinomial(n, p, size=n_resamples)  # (B, distinct)
        return counts @ keys / n
    out = np.empty((n_resamples, values.shape[1]))
    step = max(1, _CHUNK // n)
    for lo in range(0, n_resamples, step):
        idx = rng.integers(0, n, size=(min(step, n_resamples - lo), n), dtype=np.int64)
        out[lo : lo + idx.shape[0]] = values[idx].mean(axis=1)
    return out


def bootstrap_mean(values, *, n_resamples: int = N_RESAMPLES, level: float = LEVEL, seed: int = 0) -> Interval:
    """The mean of per-item ``values`` (accuracy credits) and its percentile bootstrap interval."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, level)
    draws = _resampled_means(v[:, None], n_resamples, np.random.default_rng(seed))[:, 0]
    return Interval(float(v.mean()), *_percentiles(draws, level), int(v.size), level)


def bootstrap_ratio(
    numerator, denominator, *, n_resamples: int = N_RESAMPLES, level: float = LEVEL, seed: int = 0
) -> Interval:
    """``sum(numerator) / sum(denominator)`` over resampled *clusters* (e.g. a ranking group's correct-pair credit
    over its pair count), so pairs of one group are resampled together; ``n`` counts clusters."""
    num, den = np.asarray(numerator, np.float64), np.asarray(denominator, np.float64)
    if num.size == 0 or den.sum() == 0:
        return Interval(float("nan"), float("nan"), float("nan"), int(num.size), level)
    sums = _resampled_means(np.stack([num, den], axis=1), n_resamples, np.random.default_rng(seed))
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = sums[:, 0] / sums[:, 1]
    return Interval(float(num.sum() / den.sum()), *_percentiles(draws, level), int(num.size), level)


def bootstrap_correlation(
    x, y, metric: str, *, n_resamples: int = N_RESAMPLES, level: float = LEVEL, seed: int = 0
) -> Interval:
    """SRCC / PLCC / KRCC of ``x`` and ``y`` and its bootstrap interval. SRCC and PLCC are computed for many
    resamples at once; KRCC (O(n^2) each) uses at most 200 resamples."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    value = CORRELATIONS[metric](x, y)
    n = x.size
    if n < 3:
        return Interval(value, float("nan"), float("nan"), n, level)
    rng = np.random.default_rng(seed)
    if metric == "krcc":
        idx = rng.integers(0, n, size=(min(n_resamples, 200), n))
        draws = np.array([kendall(x[i], y[i]) for i in idx])
        return Interval(value, *_percentiles(draws, level), n, level)
    draws = np.empty(n_resamples)
    step = max(1, _CHUNK // (4 * n))
    for lo in range(0, n_resamples, step):
        idx = rng.integers(0, n, size=(min(step, n_resamples - lo), n))
        xs, ys = x[idx], y[idx]
        if metric == "srcc":
            xs, ys = _average_ranks(xs), _average_ranks(ys)
        draws[lo : lo + idx.shape[0]] = _pearson_rows(xs, ys)
    return Interval(value, *_percentiles(draws, level), n, level)


def paired_bootstrap(
    values_a,
    values_b,
    denominator=None,
    *,
    n_resamples: int = N_RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> PairedDifference:
    """mean(values_a) - mean(values_b) over the same items (per-item credits of two rewards), each resample
    drawing the same items for both: the interval and p-value of the difference. With ``denominator`` (per-item
    weights, e.g. a group's pair count) the statistic is ``sum(values) / sum(denominator)`` for each reward."""
    a, b = np.asarray(values_a, np.float64).reshape(-1), np.asarray(values_b, np.float64).reshape(-1)
    den = np.ones_like(a) if denominator is None else np.asarray(denominator, np.float64).reshape(-1)
    if a.shape != b.shape or den.shape != a.shape:
        raise ValueError(f"paired values differ in length: {a.size}, {b.size}, {den.size}")
    if a.size == 0 or den.sum() == 0:
        return PairedDifference(float("nan"), float("nan"), float("nan"), float("nan"), int(a.size), level)
    sums = _resampled_means(np.stack([a, b, den], axis=1), n_resamples, np.random.default_rng(seed))
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = (sums[:, 0] - sums[:, 1]) / sums[:, 2]
    share = min(float((draws <= 0).mean()), float((draws >= 0).mean()))
    return PairedDifference(
        float((a.sum() - b.sum()) / den.sum()), *_percentiles(draws, level), min(1.0, 2 * share), int(a.size), level
    )
