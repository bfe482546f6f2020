"""Correlations equal scipy's; system level and bootstrap behave as documented."""

import numpy as np
import pytest
from scipy import stats

from lightning_metrics.correlation import (
    correlate,
    correlate_metrics,
    correlations_by_group,
    kendall,
    pearson,
    spearman,
)


@pytest.fixture
def xy():
    rng = np.random.default_rng(3)
    human = rng.normal(size=300)
    metric = (human + rng.normal(size=300)).round(1)  # rounding makes ties, which tau-b corrects for
    return metric, human


def test_kendall_tau_b_by_hand():
    # pairs of m = [1, 2, 2, 3] and h = [1, 3, 2, 4]: five concordant, none discordant, (1, 2) tied in m
    # alone: tau-b = (5 - 0) / sqrt((6 - 1) * (6 - 0))
    assert kendall([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(5 / np.sqrt(30), abs=1e-12)
    # one discordant pair of six, no ties: (5 - 1) / 6
    assert kendall([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(4 / 6, abs=1e-12)


def test_equal_scipy(xy):
    m, h = xy
    assert pearson(m, h) == pytest.approx(stats.pearsonr(m, h)[0], abs=1e-12)
    assert spearman(m, h) == pytest.approx(stats.spearmanr(m, h)[0], abs=1e-12)


def test_constant_input_is_nan():
    assert np.isnan(kendall([1, 1, 1], [1, 2, 3]))
    assert np.isnan(pearson([1, 2, 3], [5, 5, 5]))


def test_system_level_is_correlation_of_means():
    systems = ["a", "a", "b", "b", "c", "c"]
    metric = [1.0, 3.0, 2.0, 2.0, 9.0, 7.0]  # means a=2, b=2, c=8
    human = [0.0, 2.0, 3.0, 5.0, 6.0, 6.0]  # means a=1, b=4, c=6
    c = correlate(metric, human, systems)
    assert c.n_systems == 3
    assert c.sys_pearson == pytest.approx(stats.pearsonr([2, 2, 8], [1, 4, 6])[0])
    assert c.sys_kendall == pytest.approx(stats.kendalltau([2, 2, 8], [1, 4, 6])[0])


def test_bootstrap_is_seeded_and_brackets_the_estimate(xy):
    m, h = xy
    systems = np.arange(300) % 5
    a, b = correlate(m, h, systems, bootstrap=200, seed=7), correlate(m, h, systems, bootstrap=200, seed=7)
    assert a.ci == b.ci
    assert correlate(m, h, systems, bootstrap=200, seed=8).ci != a.ci
    lo, hi = a.ci["seg_kendall"]
    assert lo < a.seg_kendall < hi and hi - lo < 0.2
    assert set(a.ci) == {"seg_kendall", "seg_pearson", "sys_pearson", "sys_kendall"}


def test_groups_and_parallel_cells_match_serial(xy):
    m, h = xy
    groups = np.where(np.arange(300) < 120, "x-en", "y-en")
    by_group = correlate_metrics({"metric": m}, h, groups)["metric"]
    assert list(by_group) == ["x-en", "y-en"]
    assert by_group["x-en"].seg_kendall == pytest.approx(stats.kendalltau(m[:120], h[:120])[0])
    serial = correlate_metrics({"m": m, "neg": -m}, h, groups, bootstrap=50, seed=1, num_proc=1)
    parallel = correlate_metrics({"m": m, "neg": -m}, h, groups, bootstrap=50, seed=1, num_proc=2)
    for metric in ("m", "neg"):
        for g in ("x-en", "y-en"):
            for stat, interval in serial[metric][g].ci.items():
                assert interval == pytest.approx(parallel[metric][g].ci[stat])
    assert serial["neg"]["y-en"].seg_kendall == pytest.approx(-serial["m"]["y-en"].seg_kendall)


def test_validation_averages_each_source_over_its_pairs(xy):
    """``kendall/da`` (a checkpoint monitor) is the mean of the da:* pairs alone, as scipy computes them."""
    m, h = xy
    names = ["da:is-en", "da:ja-en", "mqm:zh-en"]
    lp = np.arange(300) % 3
    rows = np.stack([np.arange(300), m, h, lp, -np.ones(300)], axis=1)
    stats_ = correlations_by_group(rows, names)
    tau = [stats.kendalltau(m[lp == i], h[lp == i])[0] for i in range(3)]
    assert stats_["kendall/da:ja-en"] == pytest.approx(tau[1], abs=1e-12)
    assert stats_["kendall/da"] == pytest.approx((tau[0] + tau[1]) / 2, abs=1e-12)
    assert stats_["kendall/mqm"] == pytest.approx(tau[2], abs=1e-12)
    assert stats_["kendall"] == pytest.approx(np.mean(tau), abs=1e-12)
    assert "kendall/is-en" not in stats_ and "sys_pearson" not in stats_
    plain = correlations_by_group(rows, ["is-en", "ja-en", "zh-en"])  # one source: no per-source keys
    assert set(plain) == {
        f"{s}{g}" for s in ("kendall", "pearson", "spearman") for g in ("", "/is-en", "/ja-en", "/zh-en")
    }
