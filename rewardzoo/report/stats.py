"""The numbers of a report: summaries, rank correlations, disagreements, group spreads, paired bootstrap.

Every function takes float arrays with NaN for "not scored" and ignores those entries. The definitions
(stated in the report too): std is the population std (ddof=0); quantiles are ``numpy.quantile``'s
default (linear); Spearman is ``scipy.stats.spearmanr`` over the rows both rewards scored; bootstrap
intervals are 95 % percentile intervals of :data:`BOOTSTRAP_RESAMPLES` resamples of the paired rows,
drawn by ``numpy.random.default_rng(BOOTSTRAP_SEED).integers(0, n, size=(resamples, n))`` — a fresh
generator per reward, so each reward's interval can be recomputed alone.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..shared.score_stats import (  # noqa: F401  (the report's definitions, shared with the monitor)
    INSEPARABLE_REL,
    QUANTILE_LABELS,
    QUANTILES,
    GroupSpread,
    Summary,
    group_spread,
    summarize,
)

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
#: Index draws per bootstrap chunk (bounds memory at 100,000 rows x 1,000 resamples).
_CHUNK_DRAWS = 20_000_000


def best_and_worst(values: np.ndarray, sign: float, k: int) -> tuple[list[int], list[int]]:
    """Rows of the best and the worst scores in the reward's direction (``sign``), best first and worst first.

    Up to ``k`` each; with fewer than ``2 k`` scores the best get the larger half, so the two lists never
    share a row. Ties in row order (a stable sort of ``-sign * values``)."""
    rows = np.flatnonzero(~np.isnan(values))
    order = rows[np.argsort(-sign * values[rows], kind="stable")]
    n_best = min(k, (order.size + 1) // 2)
    n_worst = min(k, order.size - n_best)
    worst = order[order.size - n_worst :][::-1] if n_worst else order[:0]
    return [int(r) for r in order[:n_best]], [int(r) for r in worst]


def spearman_matrix(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(rho, n): Spearman's rho of each pair over the rows both scored, and that row count. rho is NaN for
    fewer than 3 common rows or a constant column (no ranking to correlate); the diagonal is 1 (or NaN)."""
    from scipy.stats import spearmanr

    k = len(columns)
    rho, count = np.full((k, k), np.nan), np.zeros((k, k), np.int64)
    scored = [~np.isnan(c) for c in columns]
    for i in range(k):
        for j in range(i, k):
            both = scored[i] & scored[j]
            n = int(both.sum())
            count[i, j] = count[j, i] = n
            a, b = columns[i][both], columns[j][both]
            if n < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
                continue
            if i == j:
                rho[i, i] = 1.0
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rho[i, j] = rho[j, i] = float(spearmanr(a, b).statistic)
    return rho, count


def disagreements(a: np.ndarray, b: np.ndarray, sign_a: float, sign_b: float, k: int) -> tuple[list[int], list[int]]:
    """Rows where two rewards disagree most: (best on A and worst on B, best on B and worst on A), ``k`` each.

    Both rewards are turned into percentile ranks over the rows both scored (ties averaged), oriented so
    that higher is better; the gap between the two ranks orders the rows (ties by row order)."""
    from scipy.stats import rankdata

    both = np.flatnonzero(~np.isnan(a) & ~np.isnan(b))
    if both.size < 2 or k <= 0:
        return [], []
    ra = rankdata(sign_a * a[both]) / both.size
    rb = rankdata(sign_b * b[both]) / both.size
    gap = ra - rb
    order = np.argsort(-gap, kind="stable")
    high_a = [int(both[i]) for i in order[:k] if gap[i] > 0]
    order = np.argsort(gap, kind="stable")
    high_b = [int(both[i]) for i in order[:k] if gap[i] < 0]
    return high_a, high_b


@dataclass(frozen=True)
class Paired:
    """B against A on the rows both scored: ``n`` pairs, mean of B - A and the win rate of B (B better,
    in the reward's direction; ties count one half), each with its bootstrap interval (low, high)."""

    n: int
    mean_diff: float
    mean_diff_ci: tuple[float, float]
    win_rate: float
    win_rate_ci: tuple[float, float]


def wins(a: np.ndarray, b: np.ndarray, sign: float) -> np.ndarray:
    """1 where B is better than A, 0.5 for a tie, 0 where A is better."""
    d = sign * (b - a)
    return (d > 0) + 0.5 * (d == 0)


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, sign: float, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> Paired | None:
    """Mean difference and win rate of B over A with percentile bootstrap intervals; None without pairs."""
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both], b[both]
    n = a.size
    if n == 0:
        return None
    diff, win = b - a, wins(a, b, sign)
    rng = np.random.default_rng(seed)
    boot_diff, boot_win = np.empty(resamples), np.empty(resamples)
    step = max(1, _CHUNK_DRAWS // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n))  # same stream as one (resamples, n) draw
        boot_diff[start:stop] = diff[idx].mean(axis=1)
        boot_win[start:stop] = win[idx].mean(axis=1)
    tails = [50 * (1 - CONFIDENCE), 100 - 50 * (1 - CONFIDENCE)]
    lo_d, hi_d = np.percentile(boot_diff, tails)
    lo_w, hi_w = np.percentile(boot_win, tails)
    return Paired(int(n), float(diff.mean()), (float(lo_d), float(hi_d)), float(win.mean()), (float(lo_w), float(hi_w)))
