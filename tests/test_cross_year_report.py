"""The cross-year suite's diagnostics against hand-worked examples, and its report's verdicts."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from cross_year_report import diagnostics, report, within_source_kendall  # noqa: E402


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


def test_the_report_names_the_choice_and_the_verdicts(tmp_path):
    def r(k):
        return {"kendall": k, "ci": [k - 0.01, k + 0.01], "sys_pearson": 0.9, "n": 100, "n_sys": 5}

    state = {
        "correlations": {
            "uk-en": {"chrF": r(0.20), "BERTScore-e5": r(0.25), "m": r(0.27)},
            "ja-en": {"chrF": r(0.30), "BERTScore-e5": r(0.31), "m": r(0.335)},
        },
        "gains": {"m minus BERTScore-e5": {s: {"gain": 0.02, "ci": [0.01, 0.03]} for s in ("uk-en", "ja-en")}},
        "chosen": "m",
        "trajectory": {"m": {"steps": {"50": {"uk-en sample": 0.26, "val_kendall": 0.2}}, "soups": {"50": 0.25}}},
    }
    text = "\n".join(report(state, tmp_path, "python benchmarks/cross_year.py"))
    assert "Chosen on uk-en dev: **m**" in text
    assert "- ja-en: +0.0250 over BERTScore-e5 (target +0.02): **met**" in text
    assert "- ja-en: +0.0350 over chrF (target +0.04): **missed**" in text
    assert "| m minus BERTScore-e5 | +0.0200 [+0.010, +0.030] | +0.0200 [+0.010, +0.030] |" in text
    assert "| 50 | 0.2000 | - | - | - | 0.2600 | - |" in text
    assert (tmp_path / "results.md").read_text(encoding="utf-8").strip() == text.strip()
