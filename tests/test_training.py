"""Training core: overfitting, layer-wise LRs, freezing, multi-signal pre-training into
fine-tuning, DDP validation equal to single-process, exact resume, and bad configs."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from scipy import stats

from lightning_metrics.cli.main import main
from lightning_metrics.data.modules import PretrainDataModule, RatingsDataModule
from lightning_metrics.models import BleurtRegressor

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ratings(tmp_path_factory, da_rows, write_csv):
    """Real DA rows as small CSV files: 64 rows, and 48 + 31 rows in separate documents."""
    folder = tmp_path_factory.mktemp("ratings")
    return {
        "64": write_csv(folder / "r64.csv", da_rows[:64]),
        "train": write_csv(folder / "train.csv", da_rows[:48]),
        "val": write_csv(folder / "val.csv", da_rows[100:131]),
    }


def trainer(**kwargs):
    defaults = dict(
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    return pl.Trainer(**{**defaults, **kwargs})


def test_overfits_64_rows(tiny_encoder, ratings):
    pl.seed_everything(0)
    dm = RatingsDataModule(
        train=str(ratings["64"]), val=str(ratings["64"]), encoder=str(tiny_encoder), batches={"batch_size": 16}
    )
    model = BleurtRegressor(
        encoder=str(tiny_encoder),
        head={"dropout": 0.0},
        optim={"lr_encoder": 3e-3, "lr_head": 3e-3, "layerwise_decay": 1.0, "warmup_ratio": 0.0, "weight_decay": 0.0},
    )
    t = trainer(max_epochs=60, check_val_every_n_epoch=60)
    t.fit(model, dm)
    assert t.callback_metrics["val_pearson"] > 0.9
    # the logged number is the plain Pearson of predictions against the 64 human scores
    model.eval()
    with torch.no_grad():
        preds = torch.cat([model.scores_from(model(b)) for b in dm.val_dataloader()]).numpy()
    human = np.asarray(dm.val_rows["score"])
    assert stats.pearsonr(preds, human)[0] == pytest.approx(float(t.callback_metrics["val_pearson"]), abs=1e-5)


def test_layerwise_learning_rates(tiny_encoder):
    model = BleurtRegressor(
        encoder=str(tiny_encoder), optim={"lr_encoder": 1e-3, "lr_head": 5e-3, "layerwise_decay": 0.5}
    )
    lr_of = {}
    for group in model.parameter_groups():
        for p in group["params"]:
            lr_of[id(p)] = group["lr"]
    named = dict(model.named_parameters())
    assert lr_of[id(named["encoder.embeddings.word_embeddings.weight"])] == pytest.approx(1e-3 * 0.5**2)
    assert lr_of[id(named["encoder.encoder.layer.0.attention.self.query.weight"])] == pytest.approx(1e-3 * 0.5)
    assert lr_of[id(named["encoder.encoder.layer.1.output.dense.weight"])] == pytest.approx(1e-3)
    assert lr_of[id(named["head.0.weight"])] == lr_of[id(named["layer_mix.weights"])] == 5e-3
    frozen = BleurtRegressor(encoder=str(tiny_encoder), optim={"keep_embeddings_frozen": True})
    optimised = {id(p) for g in frozen.parameter_groups() for p in g["params"]}
    assert id(dict(frozen.named_parameters())["encoder.embeddings.word_embeddings.weight"]) not in optimised


@pytest.mark.parametrize("frozen_epochs, encoder_moves", [(1.0, False), (0.0, True)])
def test_encoder_freezing(tiny_encoder, ratings, frozen_epochs, encoder_moves):
    pl.seed_everything(0)
    dm = RatingsDataModule(
        train=str(ratings["train"]), val=str(ratings["val"]), encoder=str(tiny_encoder), batches={"batch_size": 16}
    )
    model = BleurtRegressor(
        encoder=str(tiny_encoder), optim={"nr_frozen_epochs": frozen_epochs, "lr_encoder": 1e-2, "warmup_ratio": 0.0}
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer(max_epochs=1, limit_val_batches=0).fit(model, dm)
    after = model.state_dict()
    encoder_changed = any(not torch.equal(before[k], after[k]) for k in before if k.startswith("encoder."))
    assert encoder_changed == encoder_moves
    assert not torch.equal(before["head.0.weight"], after["head.0.weight"])


def test_document_split_keeps_documents_whole(da_rows, tmp_path, tiny_encoder, write_csv):
    path = write_csv(tmp_path / "r.csv", da_rows)
    dm = RatingsDataModule(train=str(path), split={"fraction": 0.2}, encoder=str(tiny_encoder))
    dm.setup("fit")
    train_docs = {(lp, d) for lp, d in zip(dm.train_rows["lp"], dm.train_rows["doc_id"])}
    val_docs = {(lp, d) for lp, d in zip(dm.val_rows["lp"], dm.val_rows["doc_id"])}
    assert train_docs and val_docs and not train_docs & val_docs
    assert len(dm.val_rows["mt"]) >= 0.2 * len(da_rows)


def test_pretrain_then_finetune_from_checkpoint(tiny_encoder, ratings, tmp_path):
    from data_gen.pipeline import Recipe, generate, write_dataset

    refs = [
        "The cat sat on the mat.",
        "A dog ran fast across the green field.",
        "She left her umbrella on the bus.",
        "The museum opens at nine o'clock.",
        "It never rains here in the summer.",
        "Prices went up five percent this year.",
    ] * 3
    recipe = Recipe(signals=["bleu", "chrf", "rougeL"])
    write_dataset(generate(refs, recipe, pairs_per_sentence=3, seed=0, progress=False), tmp_path / "syn", (0, 1), {})
    targets = ["score", "bleu", "chrf", "rougeL"]
    dm = PretrainDataModule(
        data=str(tmp_path / "syn"),
        val_fraction=0.2,
        encoder=str(tiny_encoder),
        targets=targets,
        batches={"batch_size": 8},
    )
    model = BleurtRegressor(encoder=str(tiny_encoder), targets=targets, objective={"loss_weights": {"score": 2.0}})
    t = trainer(max_epochs=1, default_root_dir=tmp_path)
    t.fit(model, dm)
    assert model.target_mean[1] == pytest.approx(np.mean(dm.train_rows["bleu"]), rel=1e-5)
    ckpt = tmp_path / "pre.ckpt"
    t.save_checkpoint(ckpt)
    tuned = BleurtRegressor(encoder=str(tiny_encoder), targets=["score"], init_from=str(ckpt))
    assert torch.equal(tuned.head[-1].weight[0], model.head[-1].weight[0])  # the score row carried over
    assert torch.equal(
        tuned.encoder.encoder.layer[0].output.dense.weight, model.encoder.encoder.layer[0].output.dense.weight
    )
    assert not bool(tuned.stats_ready)


def _config(tmp_path, tiny_encoder, ratings, **trainer_overrides):
    config = {
        "seed_everything": 0,
        "model": {
            "class_path": "lightning_metrics.models.BleurtRegressor",
            "init_args": {"encoder": str(tiny_encoder), "optim": {"lr_encoder": 1e-3, "lr_head": 1e-3}},
        },
        "data": {
            "class_path": "lightning_metrics.data.modules.RatingsDataModule",
            "init_args": {
                "train": str(ratings["train"]),
                "val": str(ratings["val"]),
                "encoder": str(tiny_encoder),
                "batches": {"batch_size": 8},
            },
        },
        "trainer": {
            "max_epochs": 2,
            "accelerator": "cpu",
            "devices": 1,
            "default_root_dir": str(tmp_path),
            "enable_progress_bar": False,
            "val_check_interval": 1.0,  # the shared trainer defaults validate twice an epoch
            "num_sanity_val_steps": 0,
            "enable_model_summary": False,
            "logger": [
                {
                    "class_path": "pytorch_lightning.loggers.CSVLogger",
                    "init_args": {"save_dir": str(tmp_path), "name": "csv"},
                }
            ],
            "callbacks": [
                {
                    "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                    "init_args": {"dirpath": str(tmp_path / "ckpt"), "save_last": True, "save_top_k": 0},
                }
            ],
            **trainer_overrides,
        },
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def test_resume_gives_identical_weights(tiny_encoder, ratings, tmp_path):
    """Epoch 2 resumed in a fresh process from the epoch-1 checkpoint of a killed run equals epoch 2
    of a run that never stopped."""
    import os
    import signal
    import time

    every_epoch = {
        "callbacks": [
            {
                "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                "init_args": {
                    "dirpath": str(tmp_path / "a" / "ckpt"),
                    "filename": "{epoch}",
                    "save_top_k": -1,
                    "save_last": True,
                },
            }
        ]
    }
    config = _config(tmp_path / "a", tiny_encoder, ratings, **every_epoch)
    run = subprocess.Popen(
        [sys.executable, "-m", "lightning_metrics.cli", "fit", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = tmp_path / "a" / "ckpt" / "epoch=0.ckpt"
    deadline = time.time() + 300
    while not first.exists() and run.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    straight_done = run.poll() == 0
    if not straight_done:
        run.send_signal(signal.SIGKILL)  # the crash: whatever epoch 2 had done is lost
        run.wait()
        straight = _config(tmp_path / "s", tiny_encoder, ratings)
        assert main(["fit", "--config", str(straight)]) == 0
        reference = tmp_path / "s" / "ckpt" / "last.ckpt"
    else:
        reference = tmp_path / "a" / "ckpt" / "epoch=1.ckpt"
    assert first.exists(), run.stderr.read()[-2000:] if run.stderr else ""
    resumed = _config(tmp_path / "b", tiny_encoder, ratings)
    assert main(["fit", "--config", str(resumed), "--ckpt_path", str(first)]) == 0
    a = torch.load(reference, weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "b" / "ckpt" / "last.ckpt", weights_only=True)["state_dict"]
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    os.environ.pop("PL_GLOBAL_SEED", None)


def test_ddp_validation_equals_single_process(tiny_encoder, ratings, tmp_path):
    config = _config(tmp_path, tiny_encoder, ratings, devices=2, strategy="ddp_spawn", max_epochs=1)
    assert main(["fit", "--config", str(config)]) == 0
    with (tmp_path / "csv" / "version_0" / "metrics.csv").open() as f:
        logged = [row for row in csv.DictReader(f) if row.get("val_kendall")]
    ddp_kendall = float(logged[-1]["val_kendall"])
    model = BleurtRegressor.load_from_checkpoint(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    dm = RatingsDataModule(
        train=str(ratings["train"]), val=str(ratings["val"]), encoder=str(tiny_encoder), batches={"batch_size": 8}
    )
    single = trainer(accelerator="cpu", devices=1).validate(model, dm, verbose=False)[0]["val_kendall"]
    assert single == pytest.approx(ddp_kendall, abs=1e-6)
    assert len(dm.val_rows["mt"]) == 31  # odd: the distributed sampler padded one rank


def test_torchrun_on_two_nodes_trains_the_weights_of_ddp_spawn(tiny_encoder, ratings, tmp_path):
    """`lightning-metrics fit` under torchrun, two one-process nodes on localhost (gloo, CPU), as the
    README shows for GPUs and SLURM: Lightning's own launcher integration, no code of ours, and the
    final weights of the same run under ``ddp_spawn`` with 2 processes."""
    import socket

    spawn = _config(tmp_path / "spawn", tiny_encoder, ratings, devices=2, strategy="ddp_spawn", max_epochs=1)
    assert main(["fit", "--config", str(spawn)]) == 0
    nodes = _config(tmp_path / "torchrun", tiny_encoder, ratings, devices=1, num_nodes=2, strategy="ddp", max_epochs=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launch = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "1",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(port),
    ]
    procs = [
        subprocess.Popen(
            [*launch, "--node_rank", str(rank), "-m", "lightning_metrics.cli", "fit", "--config", str(nodes)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        errors = [p.communicate(timeout=420)[1] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], errors[0][-2000:] + errors[1][-2000:]
    a = torch.load(tmp_path / "spawn" / "ckpt" / "last.ckpt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "torchrun" / "ckpt" / "last.ckpt", weights_only=True)["state_dict"]
    assert a.keys() == b.keys()
    pl.seed_everything(0)
    start = BleurtRegressor(
        encoder=str(tiny_encoder), optim={"lr_encoder": 1e-3, "lr_head": 1e-3}
    ).state_dict()  # the config's model, seeded alike
    step = max((a[k] - start[k]).abs().max().item() for k in a if k.startswith("head."))
    assert step > 1e-3  # training moved the weights far more than the tolerance below
    for key in a:  # equal up to the order of gloo's float additions (2e-8 seen)
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-6), key


@pytest.mark.parametrize(
    "override, message",
    [
        (["--model.init_args.no_such_key", "1"], "no_such_key"),
        (
            ["--data.init_args.train", "/nonexistent/ratings.csv"],
            "error: /nonexistent/ratings.csv: data file not found (data.init_args.train)",
        ),
        (["--model.init_args.targets", "[quality]"], "missing required column 'quality'"),  # linked to the data
        (
            ["--data.init_args.ratings.normalise", "zz"],
            "config.yaml: data.init_args.ratings.normalise: 'zz' is not one of none, z, rank",
        ),
        (
            ["--data.init_args.split.fraction", "1.5"],
            "config.yaml: data.init_args.split.fraction: 1.5 is outside (0, 1)",
        ),
        (
            ["--model.init_args.readout.pooling", "mean"],
            "config.yaml: model.init_args.readout.pooling: 'mean' is not one of avg, max, cls",
        ),
        (  # a key of an earlier version, which now lives in a group
            ["--model.init_args.lr_encoder", "1e-3"],
            "error: the command line: model.init_args.lr_encoder is now model.init_args.optim.lr_encoder",
        ),
        (
            ["--model.init_args.init_from", "/nonexistent/start.ckpt"],
            "config.yaml: model.init_args.init_from: /nonexistent/start.ckpt: no such file or folder",
        ),
        (["--model.init_args.init_from", "."], "model.init_args.init_from: .: a folder, but not an exported metric"),
        (  # raised while LightningCLI builds the model: still one line, not jsonargparse's dump
            ["--model.init_args.encoder", "/nonexistent/encoder"],
            "error: encoder '/nonexistent/encoder' not found; tried: local folder",
        ),
        (
            ["--data.init_args.train", "[/nonexistent/a.csv]"],
            "error: /nonexistent/a.csv: data file not found (data.init_args.train[0].path)",
        ),
        (
            ["--data.init_args.train", "[{path: x.csv, wieght: 2}]"],
            "config.yaml: data.init_args.train[0]: unknown rating-source key(s) ['wieght']",
        ),
    ],
)
def test_bad_config_fails_before_training(tiny_encoder, ratings, tmp_path, capsys, override, message):
    config = _config(tmp_path, tiny_encoder, ratings)
    try:
        code = main(["fit", "--config", str(config), *override])
    except SystemExit as e:  # jsonargparse reports unknown keys by exiting
        code = e.code
    assert code == 2
    captured = capsys.readouterr()
    assert message in captured.err + captured.out
    assert not (tmp_path / "ckpt" / "last.ckpt").exists()


@pytest.mark.parametrize("setting", ["enable_progress_bar", "enable_checkpointing", "logger"])
def test_an_explicit_trainer_setting_overrides_the_shared_defaults(tiny_encoder, ratings, tmp_path, capsys, setting):
    """The shared defaults add a progress bar, a checkpoint saver and a learning-rate monitor; a config
    that turns their setting off trains (Lightning would raise on each pair), and its output holds no
    third-party tips or deprecation warnings."""
    config = {
        "model": {
            "class_path": "lightning_metrics.models.BleurtRegressor",
            "init_args": {"encoder": str(tiny_encoder)},
        },
        "data": {
            "class_path": "lightning_metrics.data.modules.RatingsDataModule",
            "init_args": {"train": str(ratings["train"]), "val": str(ratings["val"]), "batches": {"batch_size": 8}},
        },
        "trainer": {"max_steps": 2, "accelerator": "cpu", "default_root_dir": str(tmp_path), setting: False},
    }
    (tmp_path / "c.yaml").write_text(json.dumps(config))
    assert main(["fit", "--config", str(tmp_path / "c.yaml")]) == 0
    saved = list(tmp_path.rglob("*.ckpt"))
    assert bool(saved) == (setting != "enable_checkpointing")
    output = " ".join(capsys.readouterr())
    for noise in ("Tip:", "litlogger", "GPU available", "deprecated", "Traceback"):
        assert noise not in output


def test_native_bf16_is_read_from_the_cpus_flags(tmp_path, monkeypatch):
    """AVX-512 alone emulates bf16 (oneDNN still calls it supported); AVX512-BF16 or AMX compute it."""
    from lightning_metrics.encoders import inference

    (tmp_path / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\nprocessor\t: 1\n")
    assert inference.cpu_flags(str(tmp_path / "cpuinfo")) == {"fpu", "avx2", "avx512f", "avx512_bf16"}
    assert inference.cpu_flags(str(tmp_path / "absent")) is None
    for flags, native in (({"avx2", "avx512f", "avx512bw"}, False), ({"avx512_bf16"}, True), ({"amx_bf16"}, True)):
        monkeypatch.setattr(inference, "cpu_flags", lambda flags=flags: flags)
        assert inference.native_cpu_bf16() is native
        assert inference.training_precision("cpu", bf16_on_cpu=True) == ("bf16-mixed" if native else "32-true")


def test_bf16_on_a_cpu_without_native_bf16_is_warned_about(monkeypatch):
    import warnings

    from lightning_metrics.training import lightning_cli

    for native, expected in ((False, 1), (True, 0)):  # both kinds of CPU, whatever this one is
        monkeypatch.setattr(lightning_cli, "native_cpu_bf16", lambda native=native: native)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lightning_cli._warn_slow_cpu_bf16({"precision": "bf16-mixed", "accelerator": "cpu"})
            lightning_cli._warn_slow_cpu_bf16({"precision": "32-true", "accelerator": "cpu"})
        assert len([w for w in caught if "without native bf16" in str(w.message)]) == expected
