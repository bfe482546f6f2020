"""Inference settings: token-budget batches, precision on request (fp32 | bf16 | auto), named in the signature."""

import subprocess
import sys

import numpy as np
import pytest
from conftest import export_tiny

from lightning_metrics import load_metric
from lightning_metrics.encoders.inference import batch_limits, length_batches, resolve_precision
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models import BleurtRegressor, CometEstimator


def test_length_batches_cover_every_row_sorted_and_within_the_token_budget():
    lengths = np.random.default_rng(0).integers(1, 60, size=500)
    batches = length_batches(lengths, max_rows=64, max_tokens=1000)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(500))
    assert (np.diff(lengths[flat]) >= 0).all()  # sorted by length, so padding stays small
    for b in batches:
        assert len(b) <= 64 and len(b) * lengths[b].max() <= 1000
    # a budget: more than 64 rows when rows are short, fewer when long
    assert length_batches([5] * 300, max_rows=4096, max_tokens=1000)[0].size == 200
    assert [len(b) for b in length_batches([600, 10], max_rows=8, max_tokens=500)] == [1, 1]  # a long row alone
    # without a budget: plain row batches, as the CPU default
    assert [len(b) for b in length_batches(lengths, 64)] == [64] * 7 + [52]


def test_batch_limits_per_device():
    assert batch_limits("cpu") == (64, None) and batch_limits("cpu", 16) == (16, None)
    assert batch_limits("cuda") == (4096, 65536) and batch_limits("cuda:1", 32) == (32, 65536)
    assert resolve_precision("auto", "cpu") == "fp32" and resolve_precision("bf16", "cpu") == "bf16"
    with pytest.raises(LightningMetricsError, match="precision must be one of auto, fp32, bf16, got 'fp16'"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(LightningMetricsError, match="batch_size must be at least 1"):
        batch_limits("cpu", 0)


@pytest.fixture(scope="module")
def metrics(tmp_path_factory, tiny_encoder, da_rows, write_csv):
    folder = tmp_path_factory.mktemp("precision")
    data = write_csv(folder / "r.csv", da_rows[:48])
    comet = export_tiny(
        CometEstimator(encoder=str(tiny_encoder), head={"hidden_sizes": [16]}), tiny_encoder, data, folder, "comet"
    )
    bleurt = export_tiny(
        BleurtRegressor(encoder=str(tiny_encoder), head={"hidden_sizes": [16]}), tiny_encoder, data, folder, "bleurt"
    )
    return {"comet": comet, "bleurt": bleurt}


@pytest.mark.parametrize("family", ["comet", "bleurt"])
def test_an_export_scores_in_bf16_on_request_close_to_fp32_and_says_so(metrics, da_rows, family):
    rows = {k: [r[k] for r in da_rows[:40]] for k in ("src", "mt", "ref")}
    metric = load_metric(str(metrics[family]))
    fp32 = metric.score(**rows, device="cpu")
    assert "|precision:fp32|" in fp32.signature  # auto on a CPU
    bf16 = load_metric(str(metrics[family]), precision="bf16").score(**rows, device="cpu")
    assert "|precision:bf16|" in bf16.signature
    diff = np.abs(np.asarray(bf16.scores) - fp32.scores)
    assert 0 < diff.max() < 1e-2  # really computed in bf16, and within the documented tolerance
    # one metric switched to bf16 and back gives the fp32 scores again (weights reloaded, not rounded)
    metric.precision = "bf16"
    assert metric.score(**rows, device="cpu").scores != fp32.scores
    metric.precision = "fp32"
    again = metric.score(**rows, device="cpu")
    assert again.scores == fp32.scores and "|precision:fp32|" in again.signature


def test_score_precision_flag_and_its_one_line_errors(metrics, tmp_path):
    (tmp_path / "h.txt").write_text("The cat sat on the mat.\nA dog ran.\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("The cat is on the mat.\nA dog ran fast.\n", encoding="utf-8")
    (tmp_path / "s.txt").write_text("Le chat.\nUn chien.\n", encoding="utf-8")
    cli = [sys.executable, "-m", "lightning_metrics.cli", "score", "-t", "h.txt", "-r", "r.txt", "-s", "s.txt"]
    ok = subprocess.run(
        [*cli, "--model", str(metrics["comet"]), "--precision", "bf16", "--device", "cpu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert "|precision:bf16|" in ok.stdout.strip().splitlines()[-1]
    wrong = subprocess.run(
        [*cli, "--model", str(metrics["comet"]), "--precision", "fp16"], cwd=tmp_path, capture_output=True, text=True
    )
    assert wrong.returncode == 2 and wrong.stderr.strip().splitlines() == [
        "error: score: argument --precision: invalid choice: 'fp16' (choose from 'auto', 'fp32', 'bf16') "
        "(lightning-metrics score --help lists the options)"
    ]
    lexical = subprocess.run(
        [*cli, "--model", "bleu", "--precision", "bf16"], cwd=tmp_path, capture_output=True, text=True
    )
    assert (
        lexical.returncode != 0
        and "bleu has no option 'precision'" in lexical.stderr
        and "Traceback" not in lexical.stderr
    )
