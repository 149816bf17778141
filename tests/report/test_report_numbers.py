"""The numbers in the report's tables are NumPy / SciPy computations on the same scores."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from rewardzoo.report import build_report, stats

from .conftest import COLUMNS
from .dom import parse, table_values

RTOL = 1e-12


@pytest.fixture(scope="module")
def report(synthetic, tmp_path_factory):
    out = build_report(
        synthetic.scores,
        manifest=synthetic.manifest,
        compare=synthetic.other,
        out=tmp_path_factory.mktemp("numbers") / "report.html",
        top=5,
    )
    root, errors = parse(out.read_text(encoding="utf-8"))
    assert errors == []
    return root


def _section(root, name):
    return root.find("section", class_="reward", data_reward=name)


def _floats(cells):
    return np.array([float(c) if c not in ("", "—") else np.nan for c in cells])


@pytest.mark.parametrize("name", [c for c in COLUMNS if c != "never"])
def test_summary_table_matches_numpy(report, synthetic, name):
    x = synthetic.values[name]
    rows = table_values(_section(report, name).find("table", class_="stats"))
    subsets = {"all": np.ones(x.size, bool), **{d: synthetic.datasets == d for d in ("t2i", "edit")}}
    shown = {row[0]: row[1:] for row in rows}
    for label, mask in subsets.items():
        v = x[mask & ~np.isnan(x)]
        if label != "all" and v.size == 0:
            assert label not in shown  # a dataset the reward never scored gets no row
            continue
        if label != "all" and len(shown) == 1:
            continue  # a single dataset: only the "all" row
        cells = _floats(shown[label])
        expected = [(~np.isnan(x[mask])).sum(), v.size, np.mean(v), np.std(v), *np.quantile(v, stats.QUANTILES)]
        np.testing.assert_allclose(cells, expected, rtol=RTOL, atol=0)


def test_a_reward_that_never_applied_has_a_note_and_no_table(report):
    section = _section(report, "never")
    assert not section.find_all("table") and not section.find_all("svg")
    assert "No sample was scored" in section.get_text()


def test_constant_reward_has_one_bin_and_a_note(report):
    section = _section(report, "constant")
    assert "All 240 scores are equal" in section.get_text()
    rows = table_values(section.find("table", class_="stats"))
    assert float(rows[0][4]) == 0.0  # std, no division anywhere


def test_spearman_matrix_matches_scipy(report, synthetic):
    table = report.find("section", id="correlation").find("table", class_="spearman")
    header = [th.get_text() for th in table.find("thead").find_all("th")][1:]
    assert header == ["jpeg_compressibility", "clip_score", "tied"]  # constant and never cannot be ranked
    for row in table_values(table):
        a = synthetic.values[row[0]]
        for name, cell in zip(header, row[1:]):
            b = synthetic.values[name]
            both = ~np.isnan(a) & ~np.isnan(b)
            expected = spearmanr(a[both], b[both]).statistic
            assert float(cell) == pytest.approx(expected, rel=RTOL, abs=1e-15)


@pytest.mark.parametrize("name", ["jpeg_compressibility", "clip_score", "tied"])
def test_best_and_worst_samples_are_the_extremes(report, synthetic, name):
    x = synthetic.values[name]
    rows = np.flatnonzero(~np.isnan(x))
    order = rows[np.argsort(-x[rows], kind="stable")]  # every column here is higher-is-better
    section = _section(report, name)
    best = [int(f.attrs["data-row"]) for f in section.find("div", data_kind="best").find_all("figure")]
    worst = [int(f.attrs["data-row"]) for f in section.find("div", data_kind="worst").find_all("figure")]
    assert best == list(order[:5])
    assert worst == list(order[::-1][:5])


def test_best_and_worst_follow_the_direction():
    x = np.array([3.0, np.nan, 1.0, 2.0, 1.0, 5.0])
    assert stats.best_and_worst(x, -1.0, 2) == ([2, 4], [5, 0])
    assert stats.best_and_worst(x, 1.0, 4) == ([5, 0, 3], [4, 2])  # 5 scores: never the same row twice


def test_group_table_matches_a_loop_over_groups(report, synthetic):
    table = report.find("section", id="groups").find("table", class_="groups")
    shown = {row[0]: row[1:] for row in table_values(table)}
    for name in ("jpeg_compressibility", "clip_score", "tied", "constant"):
        x = synthetic.values[name]
        stds, ranges = [], []
        single = 0
        for g in np.unique(synthetic.groups[synthetic.groups >= 0]):
            v = x[(synthetic.groups == g) & ~np.isnan(x)]
            if v.size >= 2:
                stds.append(np.std(v))
                ranges.append(np.ptp(v))
            elif v.size == 1:
                single += 1
        threshold = stats.INSEPARABLE_REL * np.std(x[~np.isnan(x)])
        expected = [
            len(stds),
            single,
            np.mean(stds),
            np.median(stds),
            threshold,
            np.mean(np.array(ranges) <= threshold),
        ]
        np.testing.assert_allclose(_floats(shown[name]), expected, rtol=1e-9, atol=1e-15)
    assert float(shown["tied"][-1]) == pytest.approx(2 / len(stds))  # the two planted groups
    assert float(shown["constant"][-1]) == 1.0  # all equal: no group can be separated
    assert "1e-06" in report.find("section", id="groups").get_text()  # the threshold is stated


def _bootstrap(a, b, seed=stats.BOOTSTRAP_SEED, resamples=stats.BOOTSTRAP_RESAMPLES):
    """The stated method, written out: one (resamples, n) index draw from a fresh generator per reward."""
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both], b[both]
    d = b - a
    w = (d > 0) + 0.5 * (d == 0)
    idx = np.random.default_rng(seed).integers(0, a.size, size=(resamples, a.size))
    ci = lambda s: np.percentile(s[idx].mean(axis=1), [2.5, 97.5])  # noqa: E731
    return [a.size, a.mean(), b.mean(), d.mean(), *ci(d), w.mean(), *ci(w)]


def test_compare_table_matches_a_recomputed_bootstrap(report, synthetic):
    section = report.find("section", id="compare")
    text = section.get_text()
    assert f"{stats.BOOTSTRAP_RESAMPLES:,} resamples" in text and f"seed {stats.BOOTSTRAP_SEED}" in text
    shown = {row[0]: row[1:] for row in table_values(section.find("table", class_="compare"))}
    for name in ("jpeg_compressibility", "clip_score", "tied", "constant"):
        expected = _bootstrap(synthetic.values[name], synthetic.other_values[name])
        np.testing.assert_allclose(_floats(shown[name]), expected, rtol=1e-12)
    assert _floats(shown["never"][:1]) == [0]  # no pairs: a row saying so, no interval
    assert len(section.find_all("svg")) == 4  # one paired plot per reward with pairs


def test_chunked_bootstrap_equals_one_draw(monkeypatch):
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=300), rng.normal(size=300)
    whole = stats.paired_bootstrap(a, b, 1.0)
    monkeypatch.setattr(stats, "_CHUNK_DRAWS", 300 * 7)  # chunks of 7 resamples
    assert stats.paired_bootstrap(a, b, 1.0) == whole


def test_disagreement_rows_have_the_largest_rank_gaps(synthetic):
    a, b = synthetic.values["jpeg_compressibility"], synthetic.values["clip_score"]
    high_a, high_b = stats.disagreements(a, b, 1.0, 1.0, 3)
    both = np.flatnonzero(~np.isnan(a) & ~np.isnan(b))
    gap = rankdata(a[both]) / both.size - rankdata(b[both]) / both.size
    assert high_a == list(both[np.argsort(-gap, kind="stable")[:3]])
    assert high_b == list(both[np.argsort(gap, kind="stable")[:3]])
