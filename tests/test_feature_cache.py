"""Cached encoder features (lightning_metrics.encoders.features): a fit that never trains the encoder
reads each sentence's pooled layers from the cache, and equals the same fit that runs the encoder."""

from __future__ import annotations

import copy
import csv
import json
import logging

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from conftest import build_tiny_encoder

from lightning_metrics.cli.main import main
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.encoders.features import FeatureCache, cache_key, pooled_layer_features
from lightning_metrics.encoders.loading import load_encoder, load_tokenizer
from lightning_metrics.metrics import load_metric
from lightning_metrics.models import CometEstimator
from lightning_metrics.models.modules import LayerMix, pool
from lightning_metrics.training.export import export_checkpoint

FROZEN = {"trainable": ["layer_mix", "head"], "lr_head": 3e-3}


@pytest.fixture()
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("LIGHTNING_METRICS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "features"


def fit_and_export(encoder, data, folder, name, cached: bool, seed: int = 0, steps: int = 8) -> tuple:
    pl.seed_everything(seed)
    model = CometEstimator(
        encoder=str(encoder),
        head={"hidden_sizes": (16,)},
        readout={"mix_layer_norm": True, "cached_features": cached},
        optim=FROZEN,
        signals={"names": ["chrf"]},
    )
    data_module = RatingsDataModule(
        train=str(data),
        split={"fraction": 0.2},
        encoder=str(encoder),
        batches={"batch_size": 8, "sampler": "source"},
        signals={"names": ["chrf"]},
        layout=model.batch_layout,
        seed=seed,
    )
    trainer = pl.Trainer(max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, val_check_interval=4, num_sanity_val_steps=0)  # fmt: skip
    trainer.fit(model, data_module)
    trainer.save_checkpoint(folder / f"{name}.ckpt")
    return export_checkpoint(folder / f"{name}.ckpt", folder / name), trainer.callback_metrics


def test_a_cached_fit_equals_the_frozen_fit_that_runs_the_encoder(
    tiny_encoder, da_rows, write_csv, tmp_path, cache_root, caplog
):
    data = write_csv(tmp_path / "r.csv", da_rows[:120])
    caplog.set_level(logging.INFO)
    plain, plain_metrics = fit_and_export(tiny_encoder, data, tmp_path, "plain", cached=False)
    assert not cache_root.exists()  # the uncached fit never touches the cache
    cached, cached_metrics = fit_and_export(tiny_encoder, data, tmp_path, "cached", cached=True)
    rows = {k: [r[k] for r in da_rows[120:160]] for k in ("src", "mt", "ref")}
    a, b = load_metric(str(plain)).score(**rows).scores, load_metric(str(cached)).score(**rows).scores
    assert np.abs(np.asarray(a) - np.asarray(b)).max() < 1e-5 and np.std(a) > 1e-3  # equal, and not a constant
    assert cached_metrics["val_kendall"] == pytest.approx(float(plain_metrics["val_kendall"]), abs=1e-5)
    assert "sentences encoded" in caplog.text
    # a second fit, another seed: every sentence read back, none encoded again
    caplog.clear()
    fit_and_export(tiny_encoder, data, tmp_path, "seed1", cached=True, seed=1)
    distinct = len({t for r in da_rows[:120] for t in (r["src"], r["mt"], r["ref"])})
    assert f": 0 of {distinct} sentences encoded by process 0" in caplog.text


def test_the_pooled_mix_is_the_mix_pooled():
    torch.manual_seed(0)
    states = [torch.randn(3, 5, 4) for _ in range(4)]
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    from lightning_metrics.encoders.features import layer_statistics

    for layer_norm in (False, True):
        mix = LayerMix(4, layer_norm=layer_norm)
        with torch.no_grad():
            mix.weights.copy_(torch.tensor([0.3, -1.0, 2.0, 0.1]))
            mix.gamma.fill_(1.7)
        for pooling in ("avg", "cls"):
            pooled, moments = layer_statistics(torch.stack(states), mask, pooling)
            expected = pool(mix(states, mask), mask, pooling)
            assert torch.allclose(mix.mix_pooled(pooled, moments), expected, atol=1e-6)


def test_a_changed_key_is_a_new_cache_and_a_corrupt_shard_is_rebuilt(tmp_path, caplog):
    folder = build_tiny_encoder(tmp_path / "enc", dropout=0.0)
    encoder, tokenizer = load_encoder(str(folder))[0], load_tokenizer(str(folder))
    texts = ["The cat sat on the mat.", "A dog ran fast.", "Prices went up."]
    key = cache_key(encoder, tokenizer, 64, "avg")
    assert key != cache_key(encoder, tokenizer, 32, "avg") and key != cache_key(encoder, tokenizer, 64, "cls")

    def encode(batch):
        return pooled_layer_features(encoder, tokenizer, batch, 64, "avg")

    cache = FeatureCache(key, tmp_path / "features")
    assert cache.build(texts, encode) == 3 and cache.build(texts, encode) == 0
    first = cache.table(texts).lookup(texts[:1])[0]
    original = copy.deepcopy(encoder)
    with torch.no_grad():
        encoder.embeddings.position_embeddings.weight[1] += 1.0  # one weight row moved: another encoder
    moved = FeatureCache(cache_key(encoder, tokenizer, 64, "avg"), tmp_path / "features")
    assert moved.folder != cache.folder and moved.build(texts, encode) == 3
    assert not torch.allclose(moved.table(texts).lookup(texts[:1])[0], first)
    shard = cache.shards()[0]
    shard.write_bytes(shard.read_bytes()[:100])  # cut short
    with caplog.at_level(logging.WARNING):
        assert cache.build(texts, lambda batch: pooled_layer_features(original, tokenizer, batch, 64, "avg")) == 3
    assert caplog.text.count("is unreadable") == 1 and str(shard) in caplog.text
    assert len(cache.shards()) == 1


def test_a_cached_fit_under_ddp_validates_as_one_process(tiny_encoder, da_rows, write_csv, tmp_path, cache_root):
    """``fit --config`` on two spawned processes: each encodes its share of the missing sentences, and
    the validation Kendall both log equals one process validating the checkpoint without the cache."""
    train, val = write_csv(tmp_path / "train.csv", da_rows[:48]), write_csv(tmp_path / "val.csv", da_rows[100:131])
    model_args = {"encoder": str(tiny_encoder), "head": {"hidden_sizes": [16]}, "optim": FROZEN}
    data_args = {"train": str(train), "val": str(val), "encoder": str(tiny_encoder), "batches": {"batch_size": 8}}
    trainer_args = {
        "max_epochs": 1, "accelerator": "cpu", "devices": 2, "strategy": "ddp_spawn", "val_check_interval": 1.0,
        "default_root_dir": str(tmp_path), "enable_progress_bar": False, "num_sanity_val_steps": 0,
        "logger": [{"class_path": "pytorch_lightning.loggers.CSVLogger", "init_args": {"save_dir": str(tmp_path)}}],
        "callbacks": [{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                       "init_args": {"dirpath": str(tmp_path / "ckpt"), "save_last": True, "save_top_k": 0}}],
    }  # fmt: skip
    config = {
        "seed_everything": 0,
        "model": {"class_path": "lightning_metrics.models.CometEstimator", "init_args": model_args},
        "data": {"class_path": "lightning_metrics.data.modules.RatingsDataModule", "init_args": data_args},
        "trainer": trainer_args,
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    assert main(["fit", "--config", str(tmp_path / "config.yaml")]) == 0
    (folder,) = list(cache_root.iterdir())
    assert len(list(folder.glob("shard-*.safetensors"))) == 2  # one per process
    with next(tmp_path.glob("lightning_logs/version_0/metrics.csv")).open() as f:
        ddp_kendall = float([row for row in csv.DictReader(f) if row.get("val_kendall")][-1]["val_kendall"])
    model = CometEstimator.load_from_checkpoint(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    data = RatingsDataModule(**{**data_args, "layout": model.batch_layout})
    single = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    assert single.validate(model, data, verbose=False)[0]["val_kendall"] == pytest.approx(ddp_kendall, abs=1e-6)
