"""Ensembles: the score is the mean of the members' standardised scores; one load_metric call
loads the folder; members with one encoder embed each sentence once; bad requests are one line."""

import json

import numpy as np
import pytest
import pytorch_lightning as pl

from lightning_metrics import load_metric
from lightning_metrics.cli.main import main
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.models import CometEstimator
from lightning_metrics.training.export import export_checkpoint


@pytest.fixture(scope="module")
def members(tmp_path_factory, tiny_encoder, document_rows, write_csv):
    """Two tiny estimators on one frozen encoder (no layer mix), one trained further: different heads,
    equal encoders."""
    folder = tmp_path_factory.mktemp("ensemble")
    data = write_csv(folder / "r.csv", document_rows)
    out = []
    for name, steps in (("a", 2), ("b", 5)):
        pl.seed_everything(0)
        model = CometEstimator(
            encoder=str(tiny_encoder),
            head={"hidden_sizes": (16,)},
            optim={"nr_frozen_epochs": 1.0, "keep_embeddings_frozen": True, "lr_head": 1e-2},
            readout={"layer_mix": False},
        )
        dm = RatingsDataModule(
            train=str(data),
            split={"fraction": 0.2},
            encoder=str(tiny_encoder),
            batches={"batch_size": 8},
            layout=model.batch_layout,
        )
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
        trainer.save_checkpoint(folder / f"{name}.ckpt")
        out.append(export_checkpoint(folder / f"{name}.ckpt", folder / name))
    return data, out


def test_ensemble_is_the_mean_of_standardised_members(members, tmp_path, document_rows):
    data, (a, b) = members
    out = tmp_path / "ens"
    assert (
        main(
            [
                "export",
                "--ensemble",
                str(a),
                str(b),
                "chrf",
                "--data",
                str(data),
                "--out",
                str(out),
                "--weights",
                "1",
                "1",
                "2",
            ]
        )
        == 0
    )
    ens = load_metric(str(out))
    meta = json.loads((out / "metric.json").read_text())
    assert meta["family"] == "Ensemble" and [m["label"] for m in meta["members"]] == ["a", "b", "chrf"]
    rows = document_rows[:40]
    given = {k: [r[k] for r in rows] for k in ("src", "mt", "ref")}
    result = ens.score(**given)
    parts = [np.asarray(load_metric(str(p)).score(**given).scores) for p in (a, b, "chrf")]
    train = {k: [r[k] for r in document_rows] for k in ("src", "mt", "ref")}  # all rows: fewer than --max-rows
    expected_stats = [
        (np.mean(s), np.std(s)) for s in (np.asarray(load_metric(str(p)).score(**train).scores) for p in (a, b, "chrf"))
    ]
    assert [v for s in meta["stats"] for v in (s["mean"], s["std"])] == pytest.approx(
        [v for pair in expected_stats for v in pair]
    )
    z = [(p - m) / s for p, (m, s) in zip(parts, expected_stats)]
    assert result.scores == pytest.approx(((z[0] + z[1] + 2 * z[2]) / 4).tolist(), abs=1e-9)
    assert result.signature.startswith("ens|hash:") and "|members:a+b+chrf|" in result.signature
    assert (
        ens.members[0][1].shared_embeddings is ens.members[1][1].shared_embeddings
    )  # one frozen encoder: embedded once
    assert len(ens.members[0][1].shared_embeddings) == len({t for k in given for t in given[k]})


def test_ensemble_requests_fail_in_one_line(members, tmp_path, capsys):
    data, (a, _) = members
    for args, problem in (
        (["--ensemble", str(a), "chrf", "--out", str(tmp_path / "x")], "needs --data RATINGS"),
        (["--ensemble", str(a), "comet", "--data", str(data), "--out", str(tmp_path / "x")], "unknown metric 'comet'"),
        (
            ["--ensemble", str(a), "chrf", "--data", str(data), "--weights", "1", "--out", str(tmp_path / "x")],
            "one non-negative weight per member",
        ),
        (["--ensemble", str(a), str(a), "--data", str(data), "--out", str(tmp_path / "x")], "NAME=FOLDER"),
        (
            ["--ensemble", str(a), f"mine={tmp_path}", "--data", str(data), "--out", str(tmp_path / "x")],
            "not an exported metric folder",
        ),
    ):
        assert main(["export", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and problem in err[0]


def test_folders_of_one_name_are_labelled(members, tmp_path, document_rows):
    """Two exports both named ``export`` (as every fit writes them) join as ``NAME=FOLDER``; without
    labels the clash is one line that says how to name them."""
    import shutil

    data, (a, b) = members
    first, second = tmp_path / "one" / "export", tmp_path / "two" / "export"
    shutil.copytree(a, first)
    shutil.copytree(b, second)
    out = tmp_path / "ens"
    assert (
        main(["export", "--ensemble", f"mini={first}", f"e5.v1={second}", "--data", str(data), "--out", str(out)]) == 0
    )
    meta = json.loads((out / "metric.json").read_text())
    assert [m["label"] for m in meta["members"]] == ["mini", "e5.v1"]
    assert [m["path"] for m in meta["members"]] == ["members/0-mini", "members/1-e5.v1"]
    assert main(["export", "--ensemble", str(a), str(b), "--data", str(data), "--out", str(tmp_path / "plain")]) == 0
    given = {k: [r[k] for r in document_rows[:30]] for k in ("src", "mt", "ref")}
    assert load_metric(str(out)).score(**given).scores == pytest.approx(
        load_metric(str(tmp_path / "plain")).score(**given).scores, abs=1e-9
    )


def test_a_builtin_member_takes_its_options(members, tmp_path, document_rows, tiny_encoder, capsys):
    """``bertscore:model=...,layer=1`` is BERTScore on that encoder and layer, standardised on --data."""
    data, (a, _) = members
    member = f"bertscore:model={tiny_encoder},layer=1"
    out = tmp_path / "ens"
    assert main(["export", "--ensemble", str(a), member, "--data", str(data), "--out", str(out)]) == 0
    meta = json.loads((out / "metric.json").read_text())
    assert meta["members"][1] == {
        "kind": "builtin",
        "name": "bertscore_f",  # bertscore is F1
        "label": member,
        "options": {"model": str(tiny_encoder), "layer": 1},
    }
    train = {k: [r[k] for r in document_rows] for k in ("mt", "ref")}
    f1 = np.asarray(load_metric("bertscore", model=str(tiny_encoder), layer=1).score(**train).scores)
    assert meta["stats"][1]["mean"] == pytest.approx(np.mean(f1)) and meta["stats"][1]["std"] == pytest.approx(
        np.std(f1)
    )
    default_layer = np.asarray(load_metric("bertscore", model=str(tiny_encoder)).score(**train).scores)
    assert not np.allclose(f1, default_layer)  # the option took effect
    capsys.readouterr()
    for bad, problem in (("bertscore:bogus=1", "has no option 'bogus'"), ("bertscore:layer", "key=value")):
        assert main(["export", "--ensemble", str(a), bad, "--data", str(data), "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and problem in err[0]
