"""Score statistics shared by the report and the training monitor: summaries and within-group spread.

Both take float arrays with NaN for "not scored" and ignore those entries. The definitions: std is the
population std (ddof=0); quantiles are ``numpy.quantile``'s default (linear); a group is *inseparable* when
its scores span (max - min) at most :data:`INSEPARABLE_REL` times the reward's overall std over the rows
given. NumPy only; part of the core layer, so :mod:`rewardzoo.report` and :mod:`rewardzoo.monitor` import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
QUANTILE_LABELS = ("min", "p5", "p25", "median", "p75", "p95", "max")
#: A group whose scores span at most this fraction of the reward's overall std cannot be told apart.
INSEPARABLE_REL = 1e-6


@dataclass(frozen=True)
class Summary:
    """Statistics of one reward's scored values (``n == 0``: all fields but ``n`` are None)."""

    n: int
    mean: float | None
    std: float | None
    quantiles: tuple[float, ...] | None


def summarize(values: np.ndarray) -> Summary:
    """Count, mean, population std and :data:`QUANTILES` of the non-NaN values."""
    x = values[~np.isnan(values)]
    if x.size == 0:
        return Summary(0, None, None, None)
    return Summary(int(x.size), float(np.mean(x)), float(np.std(x)), tuple(float(q) for q in np.quantile(x, QUANTILES)))


@dataclass(frozen=True)
class GroupSpread:
    """Within-group spread of one reward: ``stds`` (population std of each group with at least two scored
    members), ``ranges`` (max - min), ``threshold`` (:data:`INSEPARABLE_REL` x the overall std) and how
    many groups have ``range <= threshold`` (``inseparable``); ``skipped``: groups with a single score;
    ``codes``: the group code of each entry of ``stds`` and ``ranges``."""

    stds: np.ndarray
    ranges: np.ndarray
    threshold: float
    inseparable: int
    skipped: int
    codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def fraction_inseparable(self) -> float | None:
        return self.inseparable / self.stds.size if self.stds.size else None


def group_spread(values: np.ndarray, groups: np.ndarray, rel: float = INSEPARABLE_REL) -> GroupSpread:
    """Per-group spread of ``values`` (NaN: not scored); ``groups``: an integer code per row, -1 for none."""
    keep = ~np.isnan(values) & (groups >= 0)
    x, g = values[keep], groups[keep]
    overall = float(np.std(values[~np.isnan(values)])) if (~np.isnan(values)).any() else 0.0
    threshold = rel * overall
    if x.size == 0:
        return GroupSpread(np.zeros(0), np.zeros(0), threshold, 0, 0)
    order = np.argsort(g, kind="stable")
    x, g = x[order], g[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, g.size])
    means = np.add.reduceat(x, starts) / sizes
    stds = np.sqrt(np.add.reduceat((x - np.repeat(means, sizes)) ** 2, starts) / sizes)
    ranges = np.maximum.reduceat(x, starts) - np.minimum.reduceat(x, starts)
    many = sizes >= 2
    return GroupSpread(
        stds[many], ranges[many], threshold, int((ranges[many] <= threshold).sum()), int((~many).sum()), g[starts][many]
    )
