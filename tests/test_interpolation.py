"""`lightning-metrics interpolate`: a start and its fine-tune, both real exports of a tiny model trained
here; alpha 0 and 1 score as the parents, 0.5 is the mean of their weights, and parents of two
architectures are one line."""

from __future__ import annotations

import json
import re

import pytest
import scipy.stats
import torch
from conftest import export_tiny
from test_workflow import lm, ok

from lightning_metrics import load_metric
from lightning_metrics.cli.main import main
from lightning_metrics.evaluation.alpha_rule import AlphaStep, pick_alpha
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


def test_the_dev_rule_keeps_general_dev_within_tolerance_and_prefers_the_smaller_alpha():
    steps = [
        AlphaStep(0.0, in_house=0.10, general=0.200),
        AlphaStep(0.3, in_house=0.16, general=0.196),
        AlphaStep(0.5, in_house=0.16, general=0.1951),  # ties 0.3 in-house: the smaller alpha wins
        AlphaStep(0.7, in_house=0.19, general=0.1949),  # loses 0.0051: out
        AlphaStep(1.0, in_house=0.25, general=0.150),
    ]
    chosen = pick_alpha(steps, tolerance=0.005)
    assert chosen.alpha == 0.3
    assert [s.kept for s in steps] == [True, True, True, False, False]
    nothing_kept = [AlphaStep(0.0, 0.1, 0.2), AlphaStep(1.0, 0.3, 0.1)]
    assert pick_alpha(nothing_kept).alpha == 0.0  # the start itself is always within tolerance


def test_interpolate_chooses_alpha_on_dev_ratings(parents, tmp_path, da_rows, write_csv):
    start, tuned, _ = parents
    dev = write_csv(tmp_path / "dev.csv", [{**r, "score": 2 * float(r["score"]) + 1} for r in da_rows[128:164]])
    general = write_csv(tmp_path / "general_dev.csv", da_rows[164:200])
    out = ok(
        lm(
            tmp_path,
            "interpolate",
            start,
            tuned,
            "--dev",
            dev,
            "--general-dev",
            general,
            "--alphas",
            "0.5",
            "--out",
            "mix",
        )
    )
    steps = []
    for alpha, folder in ((0.0, start), (0.5, None), (1.0, tuned)):  # measured here, independently of the rule's code
        if folder is None:
            assert main(["interpolate", str(start), str(tuned), "--alpha", "0.5", "--out", str(tmp_path / "half")]) == 0
            folder = tmp_path / "half"
        measured = []
        for rows in (da_rows[128:164], da_rows[164:200]):
            table = {k: [r[k] for r in rows] for k in ("src", "mt", "ref")}
            human = [float(r["score"]) for r in rows]
            measured.append(scipy.stats.kendalltau(load_metric(str(folder)).score(**table).scores, human).statistic)
        steps.append((alpha, *measured))
    kept = [s for s in steps if s[2] >= steps[0][2] - 0.005]
    expected = max(kept, key=lambda s: (s[1], -s[0]))[0]
    assert "-> mix" in out and f"interpolated {1 - expected:g} x {start} + {expected:g} x {tuned}" in out
    for alpha, in_house, general_dev in steps:
        assert re.search(rf"^ *{alpha:.2f} +{in_house:.4f} +{general_dev:.4f} ", out, re.M), (alpha, out)
    record = read_export(tmp_path / "mix").meta["interpolated_from"]
    assert record["alpha"] == expected and record["chosen_on"]["alpha"] == expected
    assert [s["alpha"] for s in record["chosen_on"]["steps"]] == [0.0, 0.5, 1.0]


def test_alpha_and_the_dev_rule_are_one_or_the_other(parents, tmp_path, capsys):
    start, tuned, _ = parents
    base = ["interpolate", str(start), str(tuned), "--out", str(tmp_path / "x")]
    assert main([*base, "--alpha", "0.5", "--dev", "d.csv"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --alpha: give either alpha or --dev and --general-dev to choose it, not both"
    )
    assert main([*base, "--dev", "d.csv"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --alpha: without it, --dev and --general-dev are both needed to choose it"
    )
    assert main([*base, "--dev", "d.csv", "--general-dev", "g.csv", "--alphas", "0", "0.5"]) == 2
    assert capsys.readouterr().err.strip() == "error: interpolate: --alphas: 0.0 is not in (0, 1)"
    assert not (tmp_path / "x").exists()


def test_a_soup_is_the_mean_of_its_parents_weights(parents, tmp_path):
    """average_exports of three exports (the third an interpolation, 0.75 start + 0.25 tuned): every float
    weight is (1.75 start + 1.25 tuned) / 3; the record lists the parents; one parent is one line."""
    from lightning_metrics.errors import LightningMetricsError
    from lightning_metrics.metrics.interpolation import average_exports, interpolate_exports

    start, tuned, rows = parents
    third = interpolate_exports(start, tuned, 0.25, tmp_path / "third")
    soup = read_export(average_exports([start, tuned, third], tmp_path / "soup", chosen_on={"note": "test"}))
    wa, wb, ws = read_export(start).load_weights(), read_export(tuned).load_weights(), soup.load_weights()
    for name in ws:
        expected = (1.75 * wa[name].float() + 1.25 * wb[name].float()) / 3 if ws[name].is_floating_point() else wb[name]
        assert torch.allclose(ws[name].float(), expected.float(), atol=1e-6), name
    assert [p["path"] for p in soup.meta["averaged_from"]["parents"]] == [str(start), str(tuned), str(third)]
    assert soup.meta["averaged_from"]["chosen_on"] == {"note": "test"}
    assert len(scores(tmp_path / "soup", rows)) == ROWS
    with pytest.raises(LightningMetricsError, match="at least two exports"):
        average_exports([start], tmp_path / "one")
