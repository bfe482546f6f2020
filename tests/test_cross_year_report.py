"""The cross-year suite's diagnostics, against hand-worked examples."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from cross_year_report import diagnostics, within_source_kendall  # noqa: E402


def test_within_source_kendall_counts_only_pairs_of_one_source():
    # source a: pairs (0,1) +1, (0,2) +1, (1,2) -1; source b: (3,4) +1; c has one output, no pair
    sources = ["a", "a", "a", "b", "b", "c"]
    human = [1, 2, 3, 1, 2, 9]
    metric = np.array([1.0, 3.0, 2.0, 1.0, 2.0, -5.0])
    assert within_source_kendall(metric, human, sources) == pytest.approx((1 + 1 - 1 + 1) / 4)


def test_a_metric_that_only_ranks_sources_apart_scores_zero_within_them():
    # the metric orders the two sources perfectly against each other, and ties every output of one source
    rows = {"score": [1, 2, 5, 6], "raw": [10, 20, 50, 60], "src": ["a", "a", "b", "b"]}
    result = diagnostics({"m": np.array([0.0, 0.0, 1.0, 1.0])}, rows)["m"]
    assert result["within source"] == 0.0
    assert result["all"] > 0.5 and result["raw"] == pytest.approx(result["all"])
