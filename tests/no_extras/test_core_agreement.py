"""Agreement statistics (rewardzoo.shared.agreement) against scipy and direct computations on sets whose answer is
known: an oracle reward scores 1.0, its negation 0.0, ties as each rule says."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rewardzoo.shared import agreement as ag

stats = pytest.importorskip("scipy.stats")


def _pairs(n=400, seed=0, tie_share=0.2):
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 2))
    human = np.sign(latent[:, 0] - latent[:, 1]).astype(int)
    human[rng.random(n) < tie_share] = 0
    return latent, human


def test_oracle_scores_one_and_its_negation_zero():
    latent, human = _pairs()
    diff = latent[:, 0] - latent[:, 1]
    assert ag.pairwise_accuracy(diff, human) == 1.0
    assert ag.pairwise_accuracy(-diff, human) == 0.0
    assert ag.pair_credit(diff, human).size == (human != 0).sum()  # human ties left out


@pytest.mark.parametrize("tie_credit", [0.0, 0.5, 1.0])
def test_score_ties_get_the_rule_credit(tie_credit):
    human = np.array([1, -1, 1, -1, 0])
    diff = np.array([0.0, 0.0, 2.0, 3.0, 0.0])  # two score ties, one right, one wrong, one human tie
    expected = (2 * tie_credit + 1 + 0) / 4
    assert ag.pairwise_accuracy(diff, human, tie_credit) == pytest.approx(expected)


def test_bad_labels_are_refused():
    with pytest.raises(ValueError, match="human labels"):
        ag.pairwise_accuracy([1.0], [2])


def _ties_brute(diff, human):
    """Deutsch et al.'s accuracy with ties by trying every threshold directly (O(n^2))."""
    best = (-1.0, None)
    for eps in sorted(set(np.abs(diff))):
        tie = np.abs(diff) <= eps
        correct = np.where(human == 0, tie, ~tie & (np.sign(diff) == human))
        if correct.mean() > best[0]:
            best = (correct.mean(), eps)
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_accuracy_with_ties_matches_the_brute_force(seed):
    latent, human = _pairs(200, seed, tie_share=0.3)
    rng = np.random.default_rng(seed + 10)
    diff = np.round(latent[:, 0] - latent[:, 1] + rng.normal(0, 0.7, 200), 1)  # rounded: repeated |diff|
    acc, eps = ag.accuracy_with_ties(diff, human)
    want, want_eps = _ties_brute(diff, human)
    assert acc == pytest.approx(want) and eps == want_eps
    assert ag.credit_with_ties(diff, human, eps).mean() == pytest.approx(acc)


def test_accuracy_with_ties_known_answers():
    human = np.array([1, -1, 0, 0])
    # the oracle: clear preferences far from 0, human ties exactly 0 -> a threshold below the smallest preference
    assert ag.accuracy_with_ties(np.array([2.0, -2.0, 0.0, 0.0]), human) == (1.0, 0.0)
    # the negation gets the ties right (eps = 0) and nothing else: 2 of 4
    assert ag.accuracy_with_ties(np.array([-2.0, 2.0, 0.0, 0.0]), human)[0] == 0.5


def test_accuracy_with_ties_threshold_zero_candidate():
    """Deutsch et al.'s tau_optimization (GenAI-Bench) and EditReward-Bench's grid try eps = 0; VideoAlign's loop
    starts at the smallest |diff|, so a perfect untied reward loses its closest pair there."""
    human, diff = np.array([1, -1, 1, -1]), np.array([0.5, -1.0, 2.0, -3.0])
    assert ag.accuracy_with_ties(diff, human) == (0.75, 0.5)
    assert ag.accuracy_with_ties(diff, human, zero=True) == (1.0, 0.0)
    latent, h = _pairs(300, 4, tie_share=0.3)
    d = np.round(latent[:, 0] - latent[:, 1] + np.random.default_rng(4).normal(0, 0.7, 300), 1)
    d[d == 0] = 0.05  # no exact score ties: the 0 candidate is distinct from every |diff|
    brute = max(_ties_brute(d, h)[0], float(np.mean(np.where(h == 0, d == 0, np.sign(d) == h))))
    assert ag.accuracy_with_ties(d, h, zero=True)[0] == pytest.approx(brute)
    assert ag.accuracy_with_ties_interval(d, h, zero=True).value == pytest.approx(brute)
    i, j = ag.all_pairs(5)
    assert list(zip(i, j)) == list(itertools.combinations(range(5), 2))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("rounding", [None, 0])
def test_correlations_match_scipy(seed, rounding):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=300)
    y = x + rng.normal(size=300)
    if rounding is not None:  # many ties
        x, y = np.round(x, rounding), np.round(y, rounding)
    assert ag.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert ag.pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
    assert ag.kendall(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_average_ranks_match_scipy_row_by_row():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 7, size=(5, 40)).astype(float)
    np.testing.assert_allclose(ag._average_ranks(x), stats.rankdata(x, axis=1))


def test_ranking_pairs_cover_every_within_group_pair():
    groups = ["g1", "g1", "g1", "g0", "g0"]
    ranks = [1, 2, 2, 2, 1]
    scores = [3.0, 2.0, 1.0, 0.0, 5.0]
    diff, human, owner = ag.ranking_pairs(groups, ranks, scores)
    want = []
    for g in ("g1", "g0"):
        idx = [i for i, x in enumerate(groups) if x == g]
        for i, j in itertools.combinations(idx, 2):
            want.append((scores[i] - scores[j], np.sign(ranks[j] - ranks[i]), ("g1", "g0").index(g)))
    assert sorted(zip(diff.tolist(), human.tolist(), owner.tolist())) == sorted(want)


def test_bootstrap_mean_matches_an_index_bootstrap():
    rng = np.random.default_rng(0)
    credit = rng.choice([0.0, 0.5, 1.0], p=[0.3, 0.1, 0.6], size=2000)
    got = ag.bootstrap_mean(credit, n_resamples=4000, seed=1)
    idx = np.random.default_rng(2).integers(0, credit.size, size=(4000, credit.size))
    lo, hi = np.quantile(credit[idx].mean(axis=1), [0.025, 0.975])
    assert got.value == credit.mean() and got.n == 2000
    assert got.low == pytest.approx(lo, abs=0.006) and got.high == pytest.approx(hi, abs=0.006)
    # the normal approximation of a mean's interval
    se = credit.std() / np.sqrt(credit.size)
    assert got.high - got.low == pytest.approx(2 * 1.96 * se, rel=0.08)


def test_bootstrap_of_many_distinct_values_uses_indices():
    values = np.random.default_rng(0).normal(size=500)  # > 64 distinct values
    got = ag.bootstrap_mean(values, n_resamples=2000)
    se = values.std() / np.sqrt(values.size)
    assert got.low < values.mean() < got.high
    assert got.high - got.low == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_bootstrap_correlation_interval_contains_scipy_and_is_sane():
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = x + rng.normal(size=400)
    for metric, ref in (("srcc", stats.spearmanr), ("plcc", stats.pearsonr), ("krcc", stats.kendalltau)):
        got = ag.bootstrap_correlation(x, y, metric, n_resamples=300)
        assert got.value == pytest.approx(ref(x, y).statistic)
        assert got.low < got.value < got.high < 1 and got.high - got.low < 0.3


def test_bootstrap_ratio_resamples_clusters():
    got = ag.bootstrap_ratio([3, 0, 6], [3, 3, 6])
    assert got.value == 0.75 and got.n == 3 and 0 <= got.low <= got.value <= got.high <= 1


def test_paired_bootstrap_tells_a_better_reward_apart():
    rng = np.random.default_rng(0)
    a = (rng.random(3000) < 0.75).astype(float)
    b = (rng.random(3000) < 0.65).astype(float)
    found = ag.paired_bootstrap(a, b)
    assert found.difference == pytest.approx(a.mean() - b.mean())
    assert 0 < found.low < found.difference < found.high and found.p_value < 0.01
    same = ag.paired_bootstrap(a, a)
    assert same.difference == 0 and same.low == same.high == 0 and same.p_value == 1.0


def test_paired_bootstrap_sees_the_pairing():
    """Two rewards that agree on most items: the paired interval is much narrower than an unpaired one."""
    rng = np.random.default_rng(1)
    a = (rng.random(2000) < 0.7).astype(float)
    b = a.copy()
    flip = rng.choice(2000, 60, replace=False)
    b[flip] = 1 - b[flip]
    paired = ag.paired_bootstrap(a, b)
    unpaired_se = np.sqrt(a.var() / a.size + b.var() / b.size)
    assert paired.high - paired.low < 2 * 1.96 * unpaired_se / 3


def test_hundred_thousand_pair_bootstrap_runs():
    rng = np.random.default_rng(0)
    diff = rng.normal(size=100_000)
    human = np.where(rng.random(100_000) < 0.7, np.sign(diff), -np.sign(diff)).astype(int)
    got = ag.bootstrap_mean(ag.pair_credit(diff, human))
    assert got.n == 100_000 and got.low < got.value < got.high
