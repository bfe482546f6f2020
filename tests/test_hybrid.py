"""Hybrid models (signals beside the embeddings), the estimator without source features, the
signal cache, and the levers that shape the objective, each trained on a tiny model."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from lightning_metrics import load_metric
from lightning_metrics.baselines.signals import SignalSpec, compute_signals
from lightning_metrics.data.batching import SentencesCollate
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics import score_many
from lightning_metrics.models import BleurtRegressor, CometEstimator
from lightning_metrics.training.export import export_checkpoint

SIGNALS = ["chrf", "bleu", "bertscore_f"]


def _fit(model, dm, steps=6):
    trainer = pl.Trainer(
        max_epochs=1,
        limit_train_batches=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(model, dm)
    return trainer


def _hybrid_data(model, data, encoder, tmp_path, signals):
    """The hybrid tests' data module: ``data`` with a 20% dev split, batches of 8, signals cached in ``tmp_path``."""
    return RatingsDataModule(
        train=str(data),
        split={"fraction": 0.2},
        encoder=str(encoder),
        batches={"batch_size": 8},
        cache_dir=str(tmp_path / "cache"),
        signals=signals,
        layout=model.batch_layout,
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory, da_rows, write_csv):
    return write_csv(tmp_path_factory.mktemp("hybrid") / "r.csv", da_rows[:120])


def test_signals_equal_the_builtin_metrics_and_are_cached(tiny_encoder, da_rows, tmp_path):
    mt, ref = [r["mt"] for r in da_rows[:30]] * 2, [r["ref"] for r in da_rows[:30]] * 2  # every pair twice
    spec = SignalSpec(tuple(SIGNALS), str(tiny_encoder), 2)
    first = compute_signals(spec, mt, ref, tmp_path)
    specs = {n: f"{n}:model={tiny_encoder},layer=2" if n.startswith("bertscore") else n for n in SIGNALS}
    expected = score_many(list(specs.values()), mt, ref)
    assert first == pytest.approx(np.stack([expected[specs[n]] for n in SIGNALS], axis=1))
    [cache] = list(tmp_path.iterdir())
    with np.load(cache) as stored:
        assert len(stored["keys"]) == 30  # distinct pairs, once each
    assert np.array_equal(compute_signals(spec, mt[::-1], ref[::-1], tmp_path), first[::-1])
    with pytest.raises(LightningMetricsError, match="unknown signal"):
        SignalSpec(("comet",))


def test_hybrid_estimator_round_trips_through_export_in_a_fresh_process(tiny_encoder, data, tmp_path):
    pl.seed_everything(0)
    signals = {"names": SIGNALS, "encoder": str(tiny_encoder)}
    model = CometEstimator(
        encoder=str(tiny_encoder), head={"hidden_sizes": (16,)}, optim={"lr_head": 1e-2}, signals=signals
    )
    dm = _hybrid_data(model, data, tiny_encoder, tmp_path, signals)
    trainer = _fit(model, dm)
    assert (
        model.hparams.signals["layer"] == 2
    )  # resolved (the last layer of an unknown encoder) and kept in the checkpoint
    assert torch.count_nonzero(model.signal_skip.weight) > 0 and model.signal_std.tolist() == pytest.approx(
        dm.signal_std
    )
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    folder = export_checkpoint(tmp_path / "m.ckpt", tmp_path / "hybrid")
    assert (folder / "signal_encoder" / "model.safetensors").is_file()
    assert json.loads((folder / "metric.json").read_text())["signals"] == {
        "names": SIGNALS,
        "layer": 2,
        "encoder": str(tiny_encoder),
    }
    val = dm.val_rows
    n = 12
    collate = SentencesCollate(dm.tokenizer, 128, ("src", "mt", "ref"), [], {}, {})
    rows = [
        {"src": val["src"][i], "mt": val["mt"][i], "ref": val["ref"][i], "signals": val["signals"][i], "index": i}
        for i in range(n)
    ]
    model.eval()
    with torch.no_grad():
        in_memory = model.predict_scores(collate(rows)).tolist()
    args = {k: val[k][:n] for k in ("mt", "ref", "src")}
    code = (
        "import json; from lightning_metrics import load_metric; "
        f"print(json.dumps(load_metric({str(folder)!r}).score(**{args!r}).scores))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == pytest.approx(in_memory, abs=1e-5)


def test_estimator_without_source_features_reads_no_source(tiny_encoder, data, tmp_path):
    pl.seed_everything(0)
    model = CometEstimator(encoder=str(tiny_encoder), head={"hidden_sizes": (16,)}, source_features=False)
    dm = RatingsDataModule(
        train=str(data),
        split={"fraction": 0.2},
        encoder=str(tiny_encoder),
        batches={"batch_size": 8},
        layout=model.batch_layout,
    )
    assert model.head[0].in_features == 4 * 32 and model.inputs == ("mt", "ref")
    trainer = _fit(model, dm, steps=2)
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    metric = load_metric(str(export_checkpoint(tmp_path / "m.ckpt", tmp_path / "nosrc")))
    assert metric.inputs == ("mt", "ref") and not metric.needs_src
    assert len(metric.score(mt=["a cat"], ref=["the cat"]).scores) == 1


def test_objective_levers_train(tiny_encoder, tmp_path, document_rows, write_csv):
    """Huber on clipped targets, annotator weights, the pairwise term over source groups and a per-source
    bias, in one run."""
    data = write_csv(tmp_path / "r.csv", document_rows)
    pl.seed_everything(0)
    dm = RatingsDataModule(
        train=[{"path": str(data), "name": "a"}, {"path": str(data), "name": "b", "weight": 0.5}],
        ratings={"normalise": "z", "weight_by": "annotators"},
        batches={"sampler": "source", "batch_size": 16},
        split={"fraction": 0.2},
        encoder=str(tiny_encoder),
    )
    model = BleurtRegressor(
        encoder=str(tiny_encoder),
        objective={"loss": "huber", "clip_targets": 2.5, "pairwise_weight": 1.0},
        head={"source_bias": True},
        optim={"lr_head": 1e-2},
    )
    before = model.source_bias.detach().clone()
    trainer = _fit(model, dm)
    assert "train_pairwise" in trainer.callback_metrics and float(trainer.callback_metrics["train_pairwise"]) > 0
    moved = (model.source_bias.detach() - before).abs().sum(dim=1)
    assert moved[0] > 0 and moved[1] > 0 and moved[2:].sum() == 0  # one bias per source; unused rows untouched
    with pytest.raises(LightningMetricsError, match="model.loss must be one of"):
        BleurtRegressor(encoder=str(tiny_encoder), objective={"loss": "l1"})


def test_hybrid_head_starts_from_a_head_pretrained_without_signals(tiny_encoder, tmp_path):
    pre = CometEstimator(
        encoder=str(tiny_encoder), head={"hidden_sizes": (16,)}, source_features=False, targets=["score", "chrf"]
    )
    torch.save(
        {"state_dict": pre.state_dict(), "hyper_parameters": {"targets": ["score", "chrf"]}}, tmp_path / "pre.ckpt"
    )
    tuned = CometEstimator(
        encoder=str(tiny_encoder),
        head={"hidden_sizes": (16,)},
        source_features=False,
        signals={"names": SIGNALS, "encoder": str(tiny_encoder)},
        init_from=str(tmp_path / "pre.ckpt"),
    )
    first, old = tuned.head[0].weight, pre.head[0].weight
    assert first.shape[1] == old.shape[1] + len(SIGNALS)
    assert torch.equal(first[:, : old.shape[1]], old)  # the pre-trained columns carried over
    assert torch.count_nonzero(first[:, old.shape[1] :]) > 0  # the signal columns keep the new head's initial values
    assert torch.equal(tuned.head[-1].weight[0], pre.head[-1].weight[0])  # and the score row
    assert torch.count_nonzero(tuned.signal_skip.weight) == 0


def test_start_from_a_signal_scores_as_that_baseline_until_it_learns(tiny_encoder, data, tmp_path):
    signals = {"names": SIGNALS, "encoder": str(tiny_encoder)}
    model = CometEstimator(
        encoder=str(tiny_encoder),
        head={"hidden_sizes": (16,), "start_from": "bertscore_f"},
        source_features=False,
        optim={"lr_head": 1e-2},
        signals=signals,
    )
    model.signal_mean.copy_(torch.tensor([50.0, 30.0, 0.8]))
    model.signal_std.copy_(torch.tensor([10.0, 20.0, 0.1]))
    values = torch.tensor([[40.0, 10.0, 0.9], [70.0, 5.0, 0.6], [55.0, 60.0, 0.75]])
    model.eval()
    out = model.head_output(torch.randn(3, 4 * 32), {"signals": values})
    assert out[:, 0].tolist() == pytest.approx(
        [1.0, -2.0, -0.5], abs=1e-6
    )  # (0.9 - 0.8) / 0.1, ...: BERTScore F standardised
    pl.seed_everything(0)
    dm = _hybrid_data(model, data, tiny_encoder, tmp_path, signals)
    model.train()
    _fit(model, dm)
    assert torch.count_nonzero(model.head[-1].weight) > 0  # the head learns its correction
    with pytest.raises(LightningMetricsError, match="start_from 'rouge1' must be one of the model's signals"):
        CometEstimator(encoder=str(tiny_encoder), head={"start_from": "rouge1"}, signals=signals)


def test_an_export_of_version_0_1_loads_and_computes_its_signals_at_the_trained_layer(tiny_encoder, data, tmp_path):
    """0.1 exports hold flat hyper-parameters, and a hybrid one fitted through LightningCLI recorded its
    BERTScore layer only in its ``signals`` block (``signal_layer: null``): it loads, and scores with the
    layer it was trained with, not the copied encoder's last layer."""
    import shutil

    from lightning_metrics.storage.artifact import MANIFEST, METADATA, read_export, write_export

    signals = {"names": SIGNALS, "encoder": str(tiny_encoder), "layer": 1}  # not the last layer (2)
    model = CometEstimator(encoder=str(tiny_encoder), head={"hidden_sizes": (16,)}, signals=signals)
    dm = _hybrid_data(model, data, tiny_encoder, tmp_path, signals)
    _fit(model, dm, steps=1).save_checkpoint(tmp_path / "m.ckpt")
    new = export_checkpoint(tmp_path / "m.ckpt", tmp_path / "new")
    meta = read_export(new).meta
    flat = {
        k: v for group in ("readout", "head", "objective", "optim") for k, v in meta["hyper_parameters"][group].items()
    }
    flat.update(signals=SIGNALS, signal_encoder=str(tiny_encoder), signal_layer=None, source_features=True)
    old_meta = {k: v for k, v in meta.items() if k not in ("format_version", "requires", "max_length")}
    old_meta["hyper_parameters"] = flat

    def fill(folder):
        for path in new.iterdir():
            if path.name not in (METADATA, MANIFEST, "README.md"):
                (shutil.copytree if path.is_dir() else shutil.copy)(path, folder / path.name)

    old = write_export(tmp_path / "old", old_meta, fill, "a 0.1 export\n")
    rows = {k: dm.val_rows[k][:8] for k in ("src", "mt", "ref")}
    assert load_metric(str(old)).model.signal_spec.layer == 1
    assert load_metric(str(old)).score(**rows).scores == pytest.approx(load_metric(str(new)).score(**rows).scores)


def test_a_correction_to_a_start_signal_can_be_pulled_toward_zero(tiny_encoder, data, tmp_path):
    """start_from with l2_to_start: the anchor is the model as built (the baseline, a zero correction);
    a strong pull keeps the correction (head's last layer, skip) nearer its start than no pull does."""
    signals = {"names": SIGNALS, "encoder": str(tiny_encoder)}
    drift = {}
    for strength in (0.0, 10.0):
        pl.seed_everything(0)
        model = CometEstimator(
            encoder=str(tiny_encoder),
            head={"hidden_sizes": (16,), "start_from": "bertscore_f"},
            source_features=False,
            optim={"lr_head": 1e-2},
            signals=signals,
            objective={"l2_to_start": strength},
        )
        start = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if strength:
            assert model.distance_to_start().item() == 0.0
        dm = _hybrid_data(model, data, tiny_encoder, tmp_path, signals)
        _fit(model, dm)
        moved = [k for k in start if k.startswith(("head.", "signal_skip."))]
        drift[strength] = sum((model.state_dict()[k] - start[k]).pow(2).sum().item() for k in moved)
    assert drift[10.0] < 0.5 * drift[0.0]
