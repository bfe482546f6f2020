"""Scoring options: long inputs are never cut silently (`--max-length` on scoring and training, a
warning that counts the truncated rows, a one-line error above the encoder's limit), and MC
dropout (std 0 without dropout, > 0 with it, seeded, a std column in the JSON)."""

from __future__ import annotations

import logging

import pytest
from conftest import build_tiny_encoder, export_tiny

from lightning_metrics.cli.main import main
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.errors import InputError
from lightning_metrics.metrics import load_metric
from lightning_metrics.models import BleurtRegressor, CometEstimator

LONG = " ".join(["the cat sat on the mat and the dog ran fast across the green field"] * 4)
MT = ["The cat sat on the mat.", LONG, "A dog ran fast.", LONG + " again", "Prices went up."]
REF = [
    "The cat is on the mat.",
    "A dog ran.",
    "A dog ran fast across the field.",
    "She left.",
    "Prices went up five percent.",
]
SRC = ["Le chat.", "Le chien.", "Un chien.", "Elle.", "Les prix."]


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tiny_encoder, da_rows, write_csv):
    """A cross-encoder and a sentence model, trained one step and exported."""
    folder = tmp_path_factory.mktemp("long")
    data = write_csv(folder / "r.csv", da_rows[:32])
    out = {}
    for name, cls in (("cross", BleurtRegressor), ("sentences", CometEstimator)):
        out[name] = export_tiny(cls(encoder=str(tiny_encoder)), tiny_encoder, data, folder, name)
    return out


@pytest.mark.parametrize("kind", ["cross", "sentences"])
def test_truncated_rows_are_counted(exports, kind, caplog):
    metric = load_metric(str(exports[kind]), max_length=24)
    tok = metric.tokenizer
    if kind == "cross":  # the pair is one sequence
        expected = sum(len(tok(r, m)["input_ids"]) > 24 for m, r in zip(MT, REF))
    else:  # any sentence of the row
        expected = sum(any(len(tok(t)["input_ids"]) > 24 for t in texts) for texts in zip(MT, REF, SRC))
    assert 0 < expected < 5
    with caplog.at_level(logging.WARNING):
        result = metric.score(mt=MT, ref=REF, src=SRC)
    assert result.truncated == expected and len(result.scores) == 5
    assert f"{expected} of 5 rows are longer than max_length 24 tokens" in caplog.text
    full = load_metric(str(exports[kind]))  # default: 512, capped at the tiny encoder's 128
    assert full.max_length == 128
    assert full.score(mt=MT, ref=REF, src=SRC).truncated == 0


def test_max_length_above_the_encoders_limit_is_one_line(exports, tmp_path, capsys):
    with pytest.raises(InputError, match="outside 1..128"):
        load_metric(str(exports["cross"]), max_length=129)
    (tmp_path / "mt.txt").write_text("\n".join(MT) + "\n")
    (tmp_path / "ref.txt").write_text("\n".join(REF) + "\n")
    assert (
        main(
            [
                "score",
                "--model",
                str(exports["cross"]),
                "-t",
                str(tmp_path / "mt.txt"),
                "-r",
                str(tmp_path / "ref.txt"),
                "--max-length",
                "1000",
            ]
        )
        != 0
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(exports["cross"]) in err and "max_length 1000" in err, err


def test_training_data_counts_truncated_rows(tiny_encoder, da_rows, write_csv, tmp_path, caplog):
    data = write_csv(tmp_path / "r.csv", da_rows[:40])
    dm = RatingsDataModule(train=str(data), val=str(data), encoder=str(tiny_encoder), batches={"max_length": 24})
    dm.setup("fit")
    tok = dm.tokenizer
    expected = sum(len(tok(r, m)["input_ids"]) > 24 for m, r in zip(dm.train_rows["mt"], dm.train_rows["ref"]))
    assert expected > 0
    with caplog.at_level(logging.WARNING):
        dm.train_dataloader()
    assert f"{expected} of 40 training rows are longer than max_length 24 tokens" in caplog.text


@pytest.fixture(scope="module")
def dropout_exports(tmp_path_factory, da_rows, write_csv):
    """The same tiny estimator with all dropout at 0, and at 0.1 (encoder and head)."""

    folder = tmp_path_factory.mktemp("mc")
    data = write_csv(folder / "r.csv", da_rows[:32])
    out = {}
    for p in (0.0, 0.1):
        encoder = build_tiny_encoder(folder / f"enc-{p}", dropout=p)
        out[p] = export_tiny(
            CometEstimator(encoder=str(encoder), head={"dropout": p}), encoder, data, folder, f"est-{p}"
        )
    return out


def test_mc_dropout_std_is_zero_without_dropout_and_positive_with_it(dropout_exports, tmp_path, capsys):
    plain = load_metric(str(dropout_exports[0.0]))
    deterministic = plain.score(mt=MT, ref=REF, src=SRC, mc_dropout=4, seed=1)
    assert deterministic.extra["std"] == [0.0] * 5
    assert deterministic.scores == pytest.approx(plain.score(mt=MT, ref=REF, src=SRC).scores, abs=1e-6)
    noisy = load_metric(str(dropout_exports[0.1]))
    first = noisy.score(mt=MT, ref=REF, src=SRC, mc_dropout=4, seed=1)
    assert all(s > 0 for s in first.extra["std"]) and "mc_dropout:4" in first.signature
    assert noisy.score(mt=MT, ref=REF, src=SRC, mc_dropout=4, seed=1).scores == first.scores  # seeded
    assert noisy.score(mt=MT, ref=REF, src=SRC).scores != first.scores  # the plain score stays the dropout-free one
    # the CLI: a std column in the JSON; a built-in metric has no dropout (one line)
    for name, lines in (("mt", MT), ("ref", REF), ("src", SRC)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    files = ["-t", str(tmp_path / "mt.txt"), "-r", str(tmp_path / "ref.txt"), "-s", str(tmp_path / "src.txt")]
    assert (
        main(
            [
                "score",
                "--model",
                str(dropout_exports[0.1]),
                *files,
                "--mc-dropout",
                "4",
                "--seed",
                "1",
                "--json",
                str(tmp_path / "s.json"),
            ]
        )
        == 0
    )
    import json

    system = json.loads((tmp_path / "s.json").read_text())["systems"][str(tmp_path / "mt.txt")]
    assert system["std"] == pytest.approx(first.extra["std"], abs=1e-6) and "std:" in capsys.readouterr().out
    assert main(["score", "--model", "chrf", *files, "--mc-dropout", "4"]) != 0
    assert "chrf has no dropout" in capsys.readouterr().err


def test_an_export_scores_with_the_max_length_it_was_trained_with(tiny_encoder, da_rows, write_csv, tmp_path):
    """metric.json records the training max_length; scoring uses it unless --max-length says otherwise."""
    import json

    import pytorch_lightning as pl

    from lightning_metrics.training.export import export_checkpoint

    data = write_csv(tmp_path / "r.csv", da_rows[:16])
    pl.seed_everything(0)
    model = BleurtRegressor(encoder=str(tiny_encoder))
    dm = RatingsDataModule(train=str(data), val=str(data), encoder=str(tiny_encoder), batches={"max_length": 24})
    trainer = pl.Trainer(max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, limit_val_batches=0)  # fmt: skip
    trainer.fit(model, dm)
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    folder = export_checkpoint(tmp_path / "m.ckpt", tmp_path / "m")
    assert json.loads((folder / "metric.json").read_text())["max_length"] == 24
    metric = load_metric(str(folder))
    assert metric.max_length == 24
    result = metric.score(mt=MT, ref=REF)
    assert result.scores == load_metric(str(folder), max_length=24).score(mt=MT, ref=REF).scores
    assert result.truncated > 0  # the long rows are cut where training cut them
    assert load_metric(str(folder), max_length=100).max_length == 100  # an explicit value wins
