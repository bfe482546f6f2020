"""What a fine-tune may change: LoRA adapters (peft) merged at export, and head-only or layer-mix-only
fits. Real fits of a tiny model from a real export; the weights and scores are compared with the
start's and with the unmerged model's own predictions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from conftest import export_tiny

from lightning_metrics import load_metric
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models import CometEstimator
from lightning_metrics.storage.artifact import read_export
from lightning_metrics.training.export import model_from_checkpoint

FAST = {"lr_encoder": 1e-2, "lr_head": 1e-2, "warmup_ratio": 0.0}
ROWS = 16


@pytest.fixture(scope="module")
def start(tmp_path_factory, tiny_encoder, da_rows, write_csv):
    """A tiny COMET estimator export, the in-house ratings file, and rows to score."""
    folder = tmp_path_factory.mktemp("tuning")
    general = write_csv(folder / "general.csv", da_rows[:64])
    in_house = write_csv(folder / "in_house.csv", [{**r, "score": 2 * float(r["score"]) + 1} for r in da_rows[64:128]])
    export = export_tiny(CometEstimator(encoder=str(tiny_encoder)), tiny_encoder, general, folder, "start")
    rows = {k: [r[k] for r in da_rows[128 : 128 + ROWS]] for k in ("src", "mt", "ref")}
    return export, in_house, rows


def fine_tune(start, in_house, folder, name, **options):
    model = CometEstimator(
        encoder=str(start), init_from=str(start), optim={**FAST, **options.pop("optim", {})}, **options
    )
    return export_tiny(model, start, in_house, folder, name)


def changed(a: dict, b: dict) -> set[str]:
    return {k for k in a if not torch.equal(a[k], b[k])}


def test_adapters_train_only_themselves_and_merge_into_a_plain_export(start, tmp_path):
    export, in_house, rows = start
    model = CometEstimator(encoder=str(export), init_from=str(export), adapters={"rank": 4, "alpha": 8}, optim=FAST)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad and n.startswith("encoder.")}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    tuned = export_tiny(model, export, in_house, tmp_path, "adapted")
    unmerged, _ = model_from_checkpoint(tmp_path / "adapted.ckpt")  # the adapters as trained, not merged
    unmerged.eval()

    stored = read_export(tuned)
    weights, before = stored.load_weights(), read_export(export).load_weights()
    assert set(weights) == set(before)  # the same tensors as the start: no adapter left
    moved = changed(before, weights)
    assert any(k.endswith("attention.self.query.weight") for k in moved)  # the merge reached the base weights
    assert not any("embeddings" in k for k in moved)
    assert stored.meta["hyper_parameters"]["adapters"]["rank"] == 0
    assert stored.meta["adapters_merged"] == {
        "rank": 4,
        "alpha": 8.0,
        "dropout": 0.0,
        "modules": ["query", "key", "value", "dense"],
    }

    metric = load_metric(str(tuned), precision="fp32")
    merged = metric.score(**rows).scores
    metric.model = unmerged  # the same export scoring with the adapters as trained
    assert metric.score(**rows).scores == pytest.approx(merged, abs=1e-5)
    assert merged != pytest.approx(load_metric(str(export), precision="fp32").score(**rows).scores, abs=1e-4)


def test_an_adapted_export_scores_without_peft(start, tmp_path):
    export, in_house, rows = start
    tuned = fine_tune(export, in_house, tmp_path, "adapted", adapters={"rank": 2})
    expected = load_metric(str(tuned), precision="fp32").score(**rows).scores
    code = (
        "import sys, json; sys.modules['peft'] = None\n"  # any import of peft now fails
        "from lightning_metrics import load_metric\n"
        f"rows = json.loads({json.dumps(json.dumps(rows))})\n"
        f"print(json.dumps(load_metric({str(tuned)!r}, precision='fp32').score(**rows).scores))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "trainable, moves",
    [(["head"], ("head.", "signal_skip.")), (["layer_mix"], ("layer_mix.",))],
)
def test_head_only_and_layer_mix_only_fits_change_only_their_part(start, tmp_path, trainable, moves):
    export, in_house, _ = start
    tuned = fine_tune(export, in_house, tmp_path, "part", optim={"trainable": trainable})
    moved = changed(read_export(export).load_weights(), read_export(tuned).load_weights())
    moved -= {"target_mean", "target_std"}  # the in-house data's statistics, as in every fine-tune
    assert moved and all(k.startswith(moves) for k in moved), sorted(moved)


def test_bad_tuning_settings_are_one_line(start, monkeypatch):
    export = start[0]
    cases = {
        "model.optim.trainable ['decoder']: name one or more of encoder, layer_mix, head": {
            "optim": {"trainable": ["decoder"]}
        },
        "model.adapters.modules ['qkv'] match no linear layer of the encoder": {
            "adapters": {"rank": 2, "modules": ["qkv"]}
        },
        "model.optim.trainable ['layer_mix'] leaves nothing to train in this model (model.readout": {
            "optim": {"trainable": ["layer_mix"]},
            "readout": {"layer_mix": False},
        },
    }
    for message, options in cases.items():
        with pytest.raises(LightningMetricsError) as err:
            CometEstimator(encoder=str(export), init_from=str(export), **options)
        assert str(err.value).startswith(message) and "\n" not in str(err.value)
    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(LightningMetricsError, match=r"^model.adapters needs the peft package: pip install"):
        CometEstimator(encoder=str(export), init_from=str(export), adapters={"rank": 2})


def test_an_l2_pull_with_adapters_or_a_head_only_fit_pulls_only_what_moves(start, tmp_path):
    export, in_house, _ = start
    for name, options in {"adapters": {"adapters": {"rank": 2}}, "head": {"optim": {"trainable": ["head"]}}}.items():
        model = CometEstimator(
            encoder=str(export), init_from=str(export), objective={"l2_to_start": 1.0}, **{"optim": FAST, **options}
        )
        assert model._start and all(not k.startswith("encoder.") for k in model._start)
        assert float(model.distance_to_start()) == 0.0
        export_tiny(model, export, in_house, tmp_path, name)  # trains with the pull, and exports
