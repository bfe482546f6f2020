"""Fault injection: a real ``fit`` is SIGKILLed mid-epoch, during validation and halfway through a
checkpoint write, resumed from ``last.ckpt``, and must end with an unbroken run's weights, bit for
bit (one process, and ``ddp_spawn`` with 2). Also: one-line errors for unusable ``--ckpt_path``."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from fault_points import final_weights, kill_config, run_fit  # noqa: E402

from lightning_metrics.cli.main import main

# a seeded schedule of kill points: (strategy, phase, where). Steps: 48 rows / batch 8 = 6 batches
# an epoch in one process (3 per rank under DDP), 2 epochs, validation every half epoch,
# last.ckpt every 2 steps. Phase "write" stops the n-th checkpoint write halfway.
_rng = random.Random(15)
KILLS = [
    ("single", "train", _rng.choice([3, 4, 5])),
    ("single", "train", _rng.choice([7, 8, 10, 11])),
    ("single", "val", _rng.choice([3, 9])),
    ("single", "val", 6),
    ("single", "write", _rng.choice([2, 3, 4])),
    ("ddp", "train", _rng.choice([2, 4, 5])),
    ("ddp", "write", _rng.choice([2, 3])),
]


@pytest.fixture(scope="module")
def small_ratings(tmp_path_factory, da_rows, write_csv):
    folder = tmp_path_factory.mktemp("kill-ratings")
    return write_csv(folder / "train.csv", da_rows[:48]), write_csv(folder / "val.csv", da_rows[100:131])


def _config(folder: Path, encoder: Path, ratings, strategy: str, callbacks=(), plugins=None) -> Path:
    model = {
        "class_path": "lightning_metrics.models.BleurtRegressor",
        "init_args": {
            "encoder": str(encoder),
            "optim": {"lr_encoder": 1e-3, "lr_head": 1e-3},
            "head": {"dropout": 0.1},
        },
    }
    data = {
        "class_path": "lightning_metrics.data.modules.RatingsDataModule",
        "init_args": {"train": str(ratings[0]), "val": str(ratings[1]), "batches": {"batch_size": 8}},
    }
    return kill_config(folder, model, data, every=2, strategy=strategy, callbacks=callbacks, plugins=plugins)


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory, tiny_encoder, small_ratings):
    """Final weights of runs that were never killed, per strategy (computed on first use)."""
    cache: dict[str, dict] = {}

    def get(strategy: str) -> dict:
        if strategy not in cache:
            folder = tmp_path_factory.mktemp(f"unbroken-{strategy}")
            run_fit(_config(folder, tiny_encoder, small_ratings, strategy))
            cache[strategy] = final_weights(folder)
        return cache[strategy]

    return get


@pytest.mark.parametrize("strategy, phase, where", KILLS, ids=[f"{s}-{p}-{w}" for s, p, w in KILLS])
def test_killed_and_resumed_equals_unbroken(tmp_path, tiny_encoder, small_ratings, unbroken, strategy, phase, where):
    flag = tmp_path / "reached"
    if phase == "write":
        killed = _config(
            tmp_path,
            tiny_encoder,
            small_ratings,
            strategy,
            plugins=[{"class_path": "fault_points.PauseMidWrite", "init_args": {"flag": str(flag), "write": where}}],
        )
    else:
        pause = {"class_path": "fault_points.PauseAt", "init_args": {"flag": str(flag), "step": where, "phase": phase}}
        killed = _config(tmp_path, tiny_encoder, small_ratings, strategy, callbacks=[pause])
    run_fit(killed, flag=flag)
    last = tmp_path / "ckpt" / "last.ckpt"
    assert last.is_file(), "every kill point lies after the first checkpoint"
    torch.load(last, weights_only=True)  # never half written, whatever the kill interrupted
    run_fit(_config(tmp_path, tiny_encoder, small_ratings, strategy), ckpt=last)
    reference, resumed = unbroken(strategy), final_weights(tmp_path)
    assert reference.keys() == resumed.keys()
    for key in reference:
        assert torch.equal(reference[key], resumed[key]), key


def test_unusable_ckpt_path_is_one_line(tmp_path, tiny_encoder, small_ratings, capsys):
    config = _config(tmp_path / "a", tiny_encoder, small_ratings, "single")
    assert main(["fit", "--config", str(config)]) == 0
    good = tmp_path / "a" / "ckpt" / "last.ckpt"
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    other = json.loads(config.read_text())
    other["model"] = {
        "class_path": "lightning_metrics.models.CometEstimator",
        "init_args": {"encoder": str(tiny_encoder)},
    }
    other_family = tmp_path / "other-family.yaml"
    other_family.write_text(json.dumps(other))
    wider = json.loads(config.read_text())
    wider["model"]["init_args"]["head"]["hidden_sizes"] = [64]
    other_config = tmp_path / "other-config.yaml"
    other_config.write_text(json.dumps(wider))
    cases = [
        (config, tmp_path / "missing.ckpt", "checkpoint file not found"),
        (config, truncated, "not a readable Lightning checkpoint"),
        (other_family, good, "checkpoint of BleurtRegressor, but the config trains CometEstimator"),
        (other_config, good, "another model config (head"),
    ]
    for cfg, ckpt, message in cases:
        capsys.readouterr()
        assert main(["fit", "--config", str(cfg), "--ckpt_path", str(ckpt)]) != 0
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(ckpt) in err and message in err, err
