"""The WMT measures (lightning_metrics.evaluation.pairwise) on examples small enough to work by hand:
ties in the human scores, ties in the metric, a group with a single item."""

from __future__ import annotations

import numpy as np
import pytest

from lightning_metrics.evaluation.pairwise import (
    accuracy_at,
    groups_of,
    pairs_permutation_test,
    significance_clusters,
    soft_pairwise_accuracy,
    system_pairwise_accuracy,
    tie_calibrated_accuracy,
)

HUMAN = [1, 2, 3, 3]  # rows 2 and 3 tie for humans
METRIC = [0.1, 0.3, 0.2, 0.25]


def test_tie_calibration_by_hand():
    # pairs (|dm|): 0-1 agree (.2), 0-2 agree (.1), 0-3 agree (.15), 1-2 disagree (.1), 1-3 disagree (.05),
    # 2-3 a human tie the metric splits (.05): 3 of 6 at eps 0. Ties up to .05 turn 2-3 into agreement
    # (1-3 stays a disagreement): 4 of 6; from .1 on, 0-2 is lost: 3, then 2, then 1 of 6.
    result = tie_calibrated_accuracy(HUMAN, METRIC)
    assert result.accuracy == pytest.approx(4 / 6) and result.epsilon == pytest.approx(0.05)
    assert (result.groups, result.pairs) == (1, 6)
    assert accuracy_at(HUMAN, METRIC, 0.0) == pytest.approx(3 / 6)
    assert accuracy_at(HUMAN, METRIC, 0.12) == pytest.approx(3 / 6)
    assert accuracy_at(HUMAN, METRIC, 0.2) == pytest.approx(1 / 6)


def test_metric_ties_and_groups_by_item():
    # a metric tie is an agreement only with a human tie: 2-3 tied on both sides (agree), 0-1 tied by the
    # metric alone (disagree), the four pairs across agree: 5 of 6
    assert accuracy_at([1, 2, 3, 3], [0.5, 0.5, 0.9, 0.9], 0.0) == pytest.approx(5 / 6)
    # by item: {0, 1} agree (1.0); {2, 3} is a human tie, agreed once eps >= .05 -> mean 1.0
    groups = groups_of(4, "item", items=["a", "a", "b", "b"])
    result = tie_calibrated_accuracy(HUMAN, METRIC, groups)
    assert result.accuracy == pytest.approx(1.0) and result.epsilon == pytest.approx(0.05)
    # a group with a single item has no pair: it is not counted (the mean is over groups with pairs)
    lone = groups_of(5, "item", items=["a", "a", "b", "b", "c"])
    assert tie_calibrated_accuracy([*HUMAN, 7], [*METRIC, 0.0], lone).groups == 2
    by_system = groups_of(4, "system", systems=["x", "y", "x", "y"])
    assert [g.tolist() for g in by_system] == [[0, 2], [1, 3]]


def test_sampled_pairs_follow_numpy_legacy_draws():
    rng = np.random.default_rng(0)
    human, metric = rng.normal(size=40), rng.normal(size=40)
    full = tie_calibrated_accuracy(human, metric)
    sampled = tie_calibrated_accuracy(human, metric, sample_rate=0.3, seed=5)
    keep = np.random.RandomState(5).random_sample(40 * 39 // 2) <= 0.3
    assert sampled.pairs == keep.sum() and full.pairs == 780


def test_system_level_accuracy_and_spa():
    # pairs 0-1 and 0-2 agree, 1-2 does not
    assert system_pairwise_accuracy([3, 2, 1], [0.9, 0.5, 0.7]) == pytest.approx(2 / 3)
    rng = np.random.default_rng(1)
    human = rng.normal(size=(4, 30)) + np.arange(4)[:, None]  # four systems, clearly ordered
    assert soft_pairwise_accuracy(human, human) == 1.0
    assert soft_pairwise_accuracy(human, -human) < 0.2  # every p-value turned round


def test_permutation_test_and_clusters():
    rng = np.random.default_rng(2)
    human = rng.normal(size=300)
    good, noise = human + rng.normal(scale=0.3, size=300), rng.normal(size=300)
    p, delta, k = pairs_permutation_test(human, noise, good, resamples=200, seed=0)
    assert p < 0.02 and delta > 0.2 and k == 200
    p_same, delta_same, _ = pairs_permutation_test(human, good, good, resamples=50, seed=0)
    assert p_same == 1.0 and delta_same == 0.0
    # three metrics best first: 2 ties with 1 (p .3), 3 is beaten by 1 (p .01): ranks 1, 1, 2
    p_values = np.array([[0, 0.3, 0.01], [0, 0, 0.2], [0, 0, 0]])
    assert significance_clusters(p_values) == [1, 1, 2]
    assert significance_clusters(np.array([[0, 0.01], [0, 0]])) == [1, 2]
