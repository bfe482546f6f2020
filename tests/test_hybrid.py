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
from lightning_metrics.data.batching import SentencesCollate
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.export import export_checkpoint
from lightning_metrics.metrics import score_many
from lightning_metrics.models import BleurtRegressor, CometEstimator
from lightning_metrics.signals import SignalSpec, compute_signals

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


@pytest.fixture(scope="module")
def data(tmp_path_factory, da_rows, write_csv):
    return write_csv(tmp_path_factory.mktemp("hybrid") / "r.csv", da_rows[:120])


def test_signals_equal_the_builtin_metrics_and_are_cached(tiny_encoder, da_rows, tmp_path):
    mt, ref = [r["mt"] for r in da_rows[:30]] * 2, [r["ref"] for r in da_rows[:30]] * 2  # every pair twice
    spec = SignalSpec(tuple(SIGNALS), str(tiny_encoder), 2)
    first = compute_signals(spec, mt, ref, tmp_path)
    expected = score_many(SIGNALS, mt, ref, bertscore={"model": str(tiny_encoder), "layer": 2})
    assert first == pytest.approx(np.stack([expected[n] for n in SIGNALS], axis=1))
    [cache] = list(tmp_path.iterdir())
    with np.load(cache) as stored:
        assert len(stored["keys"]) == 30  # distinct pairs, once each
    assert np.array_equal(compute_signals(spec, mt[::-1], ref[::-1], tmp_path), first[::-1])
    with pytest.raises(LightningMetricsError, match="unknown signal"):
        SignalSpec(("comet",))


def test_hybrid_estimator_round_trips_through_export_in_a_fresh_process(tiny_encoder, data, tmp_path):
    pl.seed_everything(0)
    kwargs = {"signals": SIGNALS, "signal_encoder": str(tiny_encoder)}
    model = CometEstimator(encoder=str(tiny_encoder), hidden_sizes=(16,), lr_head=1e-2, **kwargs)
    dm = RatingsDataModule(
        train=str(data),
        val_fraction=0.2,
        encoder=str(tiny_encoder),
        batch_size=8,
        cache_dir=str(tmp_path / "cache"),
        **kwargs,
        **model.batch_layout,
    )
    trainer = _fit(model, dm)
    assert model.hparams.signal_layer == 2  # resolved (the last layer of an unknown encoder) and kept in the checkpoint
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
    model = CometEstimator(encoder=str(tiny_encoder), hidden_sizes=(16,), source_features=False)
    dm = RatingsDataModule(
        train=str(data), val_fraction=0.2, encoder=str(tiny_encoder), batch_size=8, **model.batch_layout
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
        normalise="z",
        weight_by="annotators",
        sampler="source",
        val_fraction=0.2,
        encoder=str(tiny_encoder),
        batch_size=16,
    )
    model = BleurtRegressor(
        encoder=str(tiny_encoder), loss="huber", clip_targets=2.5, pairwise_weight=1.0, source_bias=True, lr_head=1e-2
    )
    before = model.source_bias.detach().clone()
    trainer = _fit(model, dm)
    assert "train_pairwise" in trainer.callback_metrics and float(trainer.callback_metrics["train_pairwise"]) > 0
    moved = (model.source_bias.detach() - before).abs().sum(dim=1)
    assert moved[0] > 0 and moved[1] > 0 and moved[2:].sum() == 0  # one bias per source; unused rows untouched
    with pytest.raises(LightningMetricsError, match="model.loss must be one of"):
        BleurtRegressor(encoder=str(tiny_encoder), loss="l1")


def test_hybrid_head_starts_from_a_head_pretrained_without_signals(tiny_encoder, tmp_path):
    pre = CometEstimator(
        encoder=str(tiny_encoder), hidden_sizes=(16,), source_features=False, targets=["score", "chrf"]
    )
    torch.save(
        {"state_dict": pre.state_dict(), "hyper_parameters": {"targets": ["score", "chrf"]}}, tmp_path / "pre.ckpt"
    )
    tuned = CometEstimator(
        encoder=str(tiny_encoder),
        hidden_sizes=(16,),
        source_features=False,
        signals=SIGNALS,
        signal_encoder=str(tiny_encoder),
        init_from=str(tmp_path / "pre.ckpt"),
    )
    first, old = tuned.head[0].weight, pre.head[0].weight
    assert first.shape[1] == old.shape[1] + len(SIGNALS)
    assert torch.equal(first[:, : old.shape[1]], old)  # the pre-trained columns carried over
    assert torch.count_nonzero(first[:, old.shape[1] :]) > 0  # the signal columns keep the new head's initial values
    assert torch.equal(tuned.head[-1].weight[0], pre.head[-1].weight[0])  # and the score row
    assert torch.count_nonzero(tuned.signal_skip.weight) == 0


def test_start_from_a_signal_scores_as_that_baseline_until_it_learns(tiny_encoder, data, tmp_path):
    kwargs = {"signals": SIGNALS, "signal_encoder": str(tiny_encoder)}
    model = CometEstimator(
        encoder=str(tiny_encoder),
        hidden_sizes=(16,),
        source_features=False,
        start_from="bertscore_f",
        lr_head=1e-2,
        **kwargs,
    )
    model.signal_mean.copy_(torch.tensor([50.0, 30.0, 0.8]))
    model.signal_std.copy_(torch.tensor([10.0, 20.0, 0.1]))
    signals = torch.tensor([[40.0, 10.0, 0.9], [70.0, 5.0, 0.6], [55.0, 60.0, 0.75]])
    model.eval()
    out = model.head_output(torch.randn(3, 4 * 32), {"signals": signals})
    assert out[:, 0].tolist() == pytest.approx(
        [1.0, -2.0, -0.5], abs=1e-6
    )  # (0.9 - 0.8) / 0.1, ...: BERTScore F standardised
    pl.seed_everything(0)
    dm = RatingsDataModule(
        train=str(data),
        val_fraction=0.2,
        encoder=str(tiny_encoder),
        batch_size=8,
        cache_dir=str(tmp_path / "cache"),
        **kwargs,
        **model.batch_layout,
    )
    model.train()
    _fit(model, dm)
    assert torch.count_nonzero(model.head[-1].weight) > 0  # the head learns its correction
    with pytest.raises(LightningMetricsError, match="start_from 'rouge1' must be one of the model's signals"):
        CometEstimator(encoder=str(tiny_encoder), start_from="rouge1", **kwargs)
