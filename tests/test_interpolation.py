"""`lightning-metrics interpolate`: a start and its fine-tune, both real exports of a tiny model trained
here; alpha 0 and 1 score as the parents, 0.5 is the mean of their weights, and parents of two
architectures are one line."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import export_tiny
from test_workflow import lm, ok

from lightning_metrics import load_metric
from lightning_metrics.cli.main import main
from lightning_metrics.metrics.ensemble_export import export_ensemble
from lightning_metrics.models import BleurtRegressor, CometEstimator
from lightning_metrics.storage.artifact import read_export

ROWS = 24


@pytest.fixture(scope="module")
def parents(tmp_path_factory, tiny_encoder, da_rows, write_csv):
    """(start, tuned, rows): a tiny COMET estimator, and its fine-tune on other ratings (another scale,
    so the target statistics differ too) with init_from, as the in-house recipe runs it."""
    folder = tmp_path_factory.mktemp("interpolation")
    general = write_csv(folder / "general.csv", da_rows[:64])
    in_house = write_csv(folder / "in_house.csv", [{**r, "score": 2 * float(r["score"]) + 1} for r in da_rows[64:128]])
    start = export_tiny(CometEstimator(encoder=str(tiny_encoder)), tiny_encoder, general, folder, "start")
    model = CometEstimator(encoder=str(start), init_from=str(start), optim={"lr_encoder": 1e-2, "lr_head": 1e-2})
    tuned = export_tiny(model, start, in_house, folder, "tuned")
    rows = {k: [r[k] for r in da_rows[128 : 128 + ROWS]] for k in ("src", "mt", "ref")}
    return start, tuned, rows


def scores(folder, rows) -> list[float]:
    return load_metric(str(folder), precision="fp32").score(**rows).scores


@pytest.mark.parametrize("alpha, parent", [(0.0, 0), (1.0, 1)])
def test_the_ends_score_as_the_parents(parents, tmp_path, alpha, parent):
    start, tuned, rows = parents
    assert main(["interpolate", str(start), str(tuned), "--alpha", str(alpha), "--out", str(tmp_path / "mix")]) == 0
    assert scores(tmp_path / "mix", rows) == pytest.approx(scores(parents[parent], rows), abs=1e-6)


def test_the_middle_is_the_mean_of_the_weights_and_records_its_parents(parents, tmp_path):
    start, tuned, rows = parents
    out = ok(lm(tmp_path, "interpolate", start, tuned, "--alpha", "0.5", "--out", "mix"))  # as a shell runs it
    assert out.strip() == f"interpolated 0.5 x {start} + 0.5 x {tuned} -> mix"
    mixed, a, b = (read_export(f) for f in (tmp_path / "mix", start, tuned))
    wa, wb, wm = a.load_weights(), b.load_weights(), mixed.load_weights()
    assert any(not torch.equal(wa[k], wb[k]) for k in wa)  # the fine-tune moved the weights
    for name in wm:
        expected = (wa[name].float() + wb[name].float()) / 2 if wm[name].is_floating_point() else wb[name]
        assert torch.allclose(wm[name].float(), expected.float(), atol=1e-7), name
    assert mixed.meta["target_mean"][0] == pytest.approx((a.meta["target_mean"][0] + b.meta["target_mean"][0]) / 2)
    assert mixed.meta["interpolated_from"] == {
        "alpha": 0.5,
        "start": {"path": str(start), "weights_sha256": a.weights_sha256},
        "tuned": {"path": str(tuned), "weights_sha256": b.weights_sha256},
    }
    middle, ends = scores(tmp_path / "mix", rows), (scores(start, rows), scores(tuned, rows))
    assert all(middle != pytest.approx(end, abs=1e-4) for end in ends)


def test_parents_of_two_architectures_are_one_line(parents, tmp_path, tiny_encoder, da_rows, write_csv, capsys):
    start, tuned, _ = parents
    data = write_csv(tmp_path / "r.csv", da_rows[:32])
    wide = export_tiny(
        CometEstimator(encoder=str(tiny_encoder), head={"hidden_sizes": (16,)}), tiny_encoder, data, tmp_path, "w"
    )
    bleurt = export_tiny(BleurtRegressor(encoder=str(tiny_encoder)), tiny_encoder, data, tmp_path, "b")
    capsys.readouterr()
    expected = {
        wide: "hyper_parameters.head.hidden_sizes",
        bleurt: "their family differ ('CometEstimator' and 'BleurtRegressor')",
    }
    for other, problem in expected.items():
        assert main(["interpolate", str(start), str(other), "--alpha", "0.5", "--out", str(tmp_path / "x")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "cannot be interpolated" in lines[0] and problem in lines[0], lines
        assert not (tmp_path / "x").exists()
    table = {k: [r[k] for r in da_rows[:40]] for k in ("mt", "ref")}
    ensemble = export_ensemble(["chrf", "bleu"], tmp_path / "ens", table)
    assert main(["interpolate", str(ensemble), str(tuned), "--alpha", "0.5", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {ensemble}: holds no model.safetensors to mix " + (
        "(an ensemble mixes its members by export --ensemble --weights)"
    )
    assert main(["interpolate", str(start), str(tuned), "--alpha", "1.5", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == "error: interpolate: --alpha: 1.5 is not in [0, 1]"
    assert json.loads((start / "metric.json").read_text())["family"] == "CometEstimator"
