"""benchmarks/common.py, which every benchmark runs on: fit-and-export through the command line, and
the one score cache with its one invalidation rule."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import common  # noqa: E402

from lightning_metrics.baselines.lexical import sentence_chrf  # noqa: E402
from lightning_metrics.metrics import load_metric  # noqa: E402


def test_fit_config_exports_once_and_the_cache_follows_the_export(tmp_path, tiny_encoder, da_rows, write_csv):
    data = write_csv(tmp_path / "r.csv", da_rows[:24])
    config = {
        "model": {
            "class_path": "lightning_metrics.models.BleurtRegressor",
            "init_args": {"encoder": str(tiny_encoder)},
        },
        "data": {
            "class_path": "lightning_metrics.data.modules.RatingsDataModule",
            "init_args": {"train": str(data), "val": str(data), "batches": {"batch_size": 8}},
        },
        "trainer": {"max_steps": 2, "accelerator": "cpu", "enable_progress_bar": False},
    }
    export, seconds = common.fit_config(config, tmp_path / "run")
    assert export == tmp_path / "run" / "export" and seconds > 0 and (tmp_path / "run" / "fit.log").is_file()
    assert common.fit_config(config, tmp_path / "run") == (export, float(f"{seconds:.1f}"))  # reused, not refit
    rows = {"mt": [r["mt"] for r in da_rows[:6]], "ref": [r["ref"] for r in da_rows[:6]]}
    first = common.cached_scores(str(export), rows, tmp_path / "scores", "m", num_proc=1)
    assert np.allclose(first, load_metric(str(export)).score(**rows).scores)
    cache = tmp_path / "scores" / "m.npy"
    np.save(cache, np.zeros(6))  # a cache newer than the export holds
    assert common.cached_scores(str(export), rows, tmp_path / "scores", "m").tolist() == [0.0] * 6
    older = cache.stat().st_mtime - 100
    os.utime(cache, (older, older))  # an export newer than its cache is scored again
    assert np.allclose(common.cached_scores(str(export), rows, tmp_path / "scores", "m", num_proc=1), first)
    chrf = common.cached_scores("chrf:word_order=2", rows, tmp_path / "scores", num_proc=1)
    assert np.allclose(chrf, sentence_chrf(rows["mt"], rows["ref"], word_order=2))
    assert (tmp_path / "scores" / "chrf_word_order=2.npy").is_file()


def test_paired_kendall_worked_example_and_its_document_bootstrap():
    human = np.array([1, 2, 3, 4, 5, 6])
    a = np.array([1, 2, 3, 4, 6, 5])  # one discordant pair of 15: tau (15 - 2) / 15
    b = np.array([2, 1, 4, 3, 5, 6])  # two: (15 - 4) / 15
    rows = common.paired_kendall(a, b, human, n=200, seed=0)
    assert rows["kendall"] == pytest.approx(13 / 15) and rows["change"] == pytest.approx(2 / 15)
    assert rows["resampled"] == "rows"
    docs = common.paired_kendall(a, b, human, n=200, seed=0, clusters=["x", "x", "x", "y", "y", "y"])
    assert docs["kendall"] == rows["kendall"] and docs["resampled"] == "2 clusters"
    # whole documents only: x twice, y twice, or one of each (the data itself), so the interval's ends
    # are among those three changes; the row bootstrap's are not
    x = common.paired_kendall(np.r_[a[:3], a[:3]], np.r_[b[:3], b[:3]], np.r_[human[:3], human[:3]], n=1, seed=0)
    y = common.paired_kendall(np.r_[a[3:], a[3:]], np.r_[b[3:], b[3:]], np.r_[human[3:], human[3:]], n=1, seed=0)
    outcomes = {round(v, 9) for v in (2 / 15, x["change"], y["change"])}
    assert {round(v, 9) for v in docs["change_ci"]} <= outcomes
    assert x["change"] == pytest.approx(1 - 1 / 3)  # in x, a is perfect and b has one swap of three pairs
    assert len(outcomes) == 3 and not {round(v, 9) for v in rows["change_ci"]} <= outcomes
