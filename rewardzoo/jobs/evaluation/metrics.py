"""A set's scores to each benchmark's metric: the value, its 95% bootstrap interval, the items counted, one row a
category, and the per-unit credits a paired comparison of two rewards resamples.

Rules (``EvalSet.rule``):

- ``pairwise``: accuracy over the non-tie human pairs, a score tie 0.5 (:func:`~rewardzoo.shared.agreement.pair_credit`);
- ``pairwise_with_ties``: VideoAlign's accuracy with ties (tie threshold calibrated on the set; the interval
  holds the threshold fixed), with their accuracy w/o ties (score ties wrong) beside it;
- ``group_pairs``: within-group pairs with distinct human ranks, pooled; the interval resamples groups;
- ``group_inversion``: HPSv2's inversion score (per group ``1 - inversions / pairs``, human-rank ties count as
  agreement, a score tie 0.5), averaged over groups;
- ``correlation``: SRCC (headline), PLCC, KRCC with the MOS;
- ``rating_pairs_with_ties`` (GenAI-Bench, t2v_metrics' ``calc_metric(..., "pairwise_acc_with_tie_optimization")``
  with no grouping): accuracy with ties over *every* pair of rated members, human label the sign of the
  difference of their mean ratings, the threshold 0 a candidate; PLCC and KRCC (tau-b) beside it. The interval
  resamples pairs with the threshold fixed; pairs share members, so it is narrower than an item-level one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...shared import agreement as ag
from .sets import EvalSet

METRIC = {
    "pairwise": "accuracy",
    "pairwise_with_ties": "accuracy_with_ties",
    "group_pairs": "accuracy",
    "group_inversion": "inversion_score",
    "correlation": "srcc",
    "rating_pairs_with_ties": "accuracy_with_ties",
}


@dataclass
class Agreement:
    """One reward's agreement with a set: ``metric``, ``interval`` (value, 95% CI, n), ``extra`` figures, one
    row a category, and ``credits`` / ``weights`` (per unit: what a paired bootstrap resamples)."""

    reward: str
    metric: str
    interval: ag.Interval
    extra: dict[str, Any] = field(default_factory=dict)
    categories: list[dict] = field(default_factory=list)
    credits: np.ndarray | None = None
    weights: np.ndarray | None = None

    def as_dict(self) -> dict:
        return {
            "reward": self.reward,
            "metric": self.metric,
            **self.interval.as_dict(),
            **self.extra,
            "categories": self.categories,
        }


def _rows(cats: list, units: np.ndarray, fn) -> list[dict]:
    """One row a category present: ``fn(mask over units)`` -> Interval."""
    names = sorted({c for c in cats if c is not None})
    out = []
    cats_arr = np.asarray([c if c is not None else "" for c in cats], dtype=object)
    for name in names:
        mask = cats_arr[units] == name
        if mask.any():
            out.append({"category": name, **fn(mask).as_dict()})
    return out


def agreement(reward: str, data: EvalSet, scores: np.ndarray, seed: int = 0) -> Agreement:
    """The agreement of ``scores`` (one per member, higher is better) with ``data``'s human judgements."""
    s = np.asarray(scores, dtype=np.float64)
    rule, metric = data.rule, METRIC[data.rule]
    if rule in ("pairwise", "pairwise_with_ties"):
        diff, human = s[data.a] - s[data.b], data.human
        pairs = np.arange(human.size)
        extra: dict[str, Any] = {"n_pairs": int(human.size), "n_human_ties": int((human == 0).sum())}
        if rule == "pairwise":
            credit = ag.pair_credit(diff, human)
            units = pairs[human != 0]
            extra["n_score_ties"] = int(((diff == 0) & (human != 0)).sum())
            cats = _rows(data.categories, units, lambda m: ag.bootstrap_mean(credit[m], seed=seed))
            return Agreement(reward, metric, ag.bootstrap_mean(credit, seed=seed), extra, cats, credit)
        zero = data.tie_zero
        eps = ag.accuracy_with_ties(diff, human, zero=zero)[1]
        credit = ag.credit_with_ties(diff, human, eps)
        extra.update(tie_threshold=eps, accuracy_without_ties=ag.pairwise_accuracy(diff, human, tie_credit=0.0))
        for name, labels in data.dimensions.items():
            h = np.asarray(labels, dtype=np.int8)
            extra[name] = {
                "accuracy_with_ties": ag.accuracy_with_ties(diff, h, zero=zero)[0],
                "accuracy_without_ties": ag.pairwise_accuracy(diff, h, tie_credit=0.0),
            }
        interval = ag.accuracy_with_ties_interval(diff, human, seed, zero=zero)
        cats = _rows(
            data.categories, pairs, lambda m: ag.accuracy_with_ties_interval(diff[m], human[m], seed, zero=zero)
        )
        return Agreement(reward, metric, interval, extra, cats, credit)
    if rule == "rating_pairs_with_ties":
        return _rating_pairs(reward, data, s, seed)
    if rule in ("group_pairs", "group_inversion"):
        diff, human, owner = ag.ranking_pairs(data.group, data.ranks, s)
        n_groups = len(data.categories)
        groups = np.arange(n_groups)
        if rule == "group_pairs":
            keep = human != 0
            credit = ag.pair_credit(diff, human)
            num = np.bincount(owner[keep], weights=credit, minlength=n_groups)
            den = np.bincount(owner[keep], minlength=n_groups).astype(np.float64)
            extra = {"n_groups": n_groups, "n_pairs": int(keep.sum()), "n_rank_ties": int((~keep).sum())}
            cats = _rows(data.categories, groups, lambda m: ag.bootstrap_ratio(num[m], den[m], seed=seed))
            return Agreement(reward, metric, ag.bootstrap_ratio(num, den, seed=seed), extra, cats, num, den)
        credit = np.where(human == 0, 1.0, np.where(diff == 0, 0.5, (np.sign(diff) == human).astype(float)))
        per_group = np.bincount(owner, weights=credit, minlength=n_groups) / np.bincount(owner, minlength=n_groups)
        extra = {"n_groups": n_groups, "n_pairs": int(human.size)}
        cats = _rows(data.categories, groups, lambda m: ag.bootstrap_mean(per_group[m], seed=seed))
        return Agreement(reward, metric, ag.bootstrap_mean(per_group, seed=seed), extra, cats, per_group)
    mos = data.mos
    members = np.arange(mos.size)
    extra = {name: ag.bootstrap_correlation(s, mos, name, seed=seed).as_dict() for name in ("plcc", "krcc")}
    cats = _rows(data.categories, members, lambda m: ag.bootstrap_correlation(s[m], mos[m], "srcc", seed=seed))
    return Agreement(reward, metric, ag.bootstrap_correlation(s, mos, "srcc", seed=seed), extra, cats)


def _rating_pairs(reward: str, data: EvalSet, s: np.ndarray, seed: int) -> Agreement:
    """GenAI-Bench's rule: accuracy with ties (threshold 0 a candidate) over every pair of rated members."""
    i, j = ag.all_pairs(s.size)
    diff, human = s[i] - s[j], np.sign(data.mos[i] - data.mos[j]).astype(np.int8)
    interval = ag.accuracy_with_ties_interval(diff, human, seed, zero=True)
    eps = ag.accuracy_with_ties(diff, human, zero=True)[1]
    extra: dict[str, Any] = {
        "n_items": int(s.size),
        "n_pairs": int(human.size),
        "n_human_ties": int((human == 0).sum()),
        "tie_threshold": eps,
        "accuracy_without_ties": ag.pairwise_accuracy(diff, human, tie_credit=0.0),
        "plcc": ag.pearson(s, data.mos),
        "krcc": ag.kendall(s, data.mos),
    }
    return Agreement(reward, "accuracy_with_ties", interval, extra, [], ag.credit_with_ties(diff, human, eps))


def compare(first: Agreement, second: Agreement, seed: int = 0) -> dict | None:
    """The paired bootstrap of ``first`` minus ``second`` on the same units (None for correlations)."""
    if first.credits is None or second.credits is None:
        return None
    found = ag.paired_bootstrap(first.credits, second.credits, first.weights, seed=seed)
    return {"a": first.reward, "b": second.reward, "metric": first.metric, **found.as_dict()}
