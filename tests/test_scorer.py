"""The scorer with COMET-style exports: equality with the in-memory model, one pass over many
systems, chunked streaming, multi-device order, missing sources, the reference-free model, and
exporting from `fit`."""

import json

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from lightning_metrics import load_metric
from lightning_metrics.cli.main import main
from lightning_metrics.data.batching import SentencesCollate
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics import learned as scorer_module
from lightning_metrics.metrics.systems import score_systems
from lightning_metrics.models import CometEstimator, CometReferenceless
from lightning_metrics.training.export import ExportBest, export_checkpoint


def _fit(family, tiny_encoder, data, out, callbacks=()):
    pl.seed_everything(0)
    model = family(encoder=str(tiny_encoder), head={"hidden_sizes": (32,)}, optim={"lr_encoder": 1e-3, "lr_head": 1e-3})
    dm = RatingsDataModule(
        train=str(data),
        val=str(data),
        encoder=str(tiny_encoder),
        batches={"batch_size": 16},
        layout=model.batch_layout,
    )
    saver = pl.callbacks.ModelCheckpoint(dirpath=out / "ckpt", monitor="val_kendall", mode="max", save_last=True)
    trainer = pl.Trainer(
        max_epochs=2,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[saver, *callbacks],
        default_root_dir=out,
    )
    trainer.fit(model, dm)
    return model, out / "ckpt" / "last.ckpt"


@pytest.fixture(scope="module")
def rows(da_rows):
    return da_rows[:37]  # odd, so a 2-rank sampler pads


@pytest.fixture(scope="module")
def estimator(tmp_path_factory, tiny_encoder, da_rows, write_csv):
    folder = tmp_path_factory.mktemp("estimator")
    model, ckpt = _fit(CometEstimator, tiny_encoder, write_csv(folder / "r.csv", da_rows[:48]), folder)
    return model.eval(), export_checkpoint(ckpt, folder / "checkpoints" / "est")


def test_export_scores_equal_the_in_memory_model(estimator, rows, tiny_encoder):
    model, folder = estimator
    meta = json.loads((folder / "metric.json").read_text())
    assert meta["family"] == "CometEstimator" and meta["inputs"] == ["src", "mt", "ref"]
    assert meta["training_data"]["train_rows"] == 48 and "Training data:" in (folder / "README.md").read_text()
    src, mt, ref = ([r[k] for r in rows] for k in ("src", "mt", "ref"))
    metric = load_metric(str(folder))
    collate = SentencesCollate(metric.tokenizer, metric.max_length, ("src", "mt", "ref"), [], {}, {})
    with torch.no_grad():
        in_memory = model.predict_scores(
            collate([{"src": s, "mt": m, "ref": r, "index": i} for i, (s, m, r) in enumerate(zip(src, mt, ref))])
        )
    assert metric.score(mt=mt, ref=ref, src=src).scores == pytest.approx(in_memory.tolist(), abs=1e-6)


def test_many_systems_in_one_pass_equal_one_by_one(estimator, rows, monkeypatch):
    _, folder = estimator
    metric = load_metric(str(folder))
    src, ref = [r["src"] for r in rows], [r["ref"] for r in rows]
    systems = {"a": [r["mt"] for r in rows], "b": [r["mt"][::-1] for r in rows], "c": [r["ref"] for r in rows]}
    alone = {name: metric.score(mt=mt, ref=ref, src=src) for name, mt in systems.items()}
    together = score_systems(metric, systems, ref, src)
    monkeypatch.setattr(scorer_module, "CHUNK_ROWS", 5)  # stream in tiny chunks
    chunked = score_systems(metric, systems, ref, src, batch_size=3)
    for name in systems:
        assert together[name].scores == pytest.approx(alone[name].scores, abs=1e-6)
        assert chunked[name].scores == pytest.approx(alone[name].scores, abs=1e-6)
        assert together[name].system_score == pytest.approx(np.mean(together[name].scores), abs=1e-12)


def test_two_processes_return_the_single_process_scores_in_order(estimator, rows):
    _, folder = estimator
    metric = load_metric(str(folder))
    src, mt, ref = ([r[k] for r in rows] for k in ("src", "mt", "ref"))
    single = metric.score(mt=mt, ref=ref, src=src, batch_size=4).scores
    double = metric.score(mt=mt, ref=ref, src=src, batch_size=4, devices=2).scores
    assert len(double) == len(single) == 37
    np.testing.assert_allclose(double, single, atol=1e-6, rtol=0)


def test_missing_sources_and_mismatched_lengths(estimator, rows, tmp_path, capsys):
    _, folder = estimator
    metric = load_metric(str(folder))
    mt, ref = [r["mt"] for r in rows], [r["ref"] for r in rows]
    with pytest.raises(LightningMetricsError, match="needs sources"):
        metric.score(mt=mt, ref=ref)
    with pytest.raises(LightningMetricsError, match="inputs differ in length: 37 mt, 37 ref, 36 src"):
        metric.score(mt=mt, ref=ref, src=[r["src"] for r in rows][:36])
    (tmp_path / "h.txt").write_text("\n".join(mt) + "\n")
    (tmp_path / "r.txt").write_text("\n".join(ref) + "\n")
    assert main(["score", "--model", str(folder), "-t", str(tmp_path / "h.txt"), "-r", str(tmp_path / "r.txt")]) == 2
    assert "reads sources: give -s SOURCE_FILE" in capsys.readouterr().err


def test_reference_free_model_scores_without_references(tmp_path, tiny_encoder, da_rows, write_csv, capsys):
    model, ckpt = _fit(CometReferenceless, tiny_encoder, write_csv(tmp_path / "r.csv", da_rows[:48]), tmp_path)
    folder = export_checkpoint(ckpt, tmp_path / "qe")
    src, mt = [r["src"] for r in da_rows[:9]], [r["mt"] for r in da_rows[:9]]
    scores = load_metric(str(folder)).score(mt=mt, src=src).scores
    (tmp_path / "h.txt").write_text("\n".join(mt) + "\n")
    (tmp_path / "s.txt").write_text("\n".join(src) + "\n")
    capsys.readouterr()
    assert main(["score", "--model", str(folder), "-t", str(tmp_path / "h.txt"), "-s", str(tmp_path / "s.txt")]) == 0
    assert f"h.txt\tSegment 8\tscore: {scores[8]:.4f}" in capsys.readouterr().out


def test_fit_exports_its_best_checkpoint(tmp_path, tiny_encoder, da_rows, write_csv):
    out = tmp_path / "checkpoints" / "from-fit"
    _fit(
        CometEstimator,
        tiny_encoder,
        write_csv(tmp_path / "r.csv", da_rows[:32]),
        tmp_path,
        callbacks=[ExportBest(str(out))],
    )
    meta = json.loads((out / "metric.json").read_text())
    assert meta["trained"]["checkpoint"].startswith("epoch=") and "val_kendall" in meta["dev_correlations"]
    assert len(load_metric(str(out)).score(mt=["a b"], ref=["a c"], src=["x y"]).scores) == 1


@pytest.mark.parametrize(
    "ref_words, mt_words, max_length",
    [(40, 12, 30), (12, 40, 30), (20, 20, 31), (20, 20, 30), (20, 30, 30), (30, 20, 30)],
)
def test_pairs_are_cut_as_bert_and_bleurt_cut_them(tiny_encoder, tmp_path, ref_words, mt_words, max_length):
    """Training and scoring cut a long ref/mt pair as BERT's ``_truncate_seq_pair`` does (and BLEURT,
    TF and its BLEURT-20 port): pop the last token of the longer side, of the mt on a tie."""
    from transformers import AutoTokenizer, BertTokenizerFast

    from lightning_metrics.data.batching import CrossEncoderCollate
    from lightning_metrics.encoders.sequences import encode_pairs

    vocab = sorted(AutoTokenizer.from_pretrained(tiny_encoder).get_vocab().items(), key=lambda kv: kv[1])
    (tmp_path / "vocab.txt").write_text("".join(f"{token}\n" for token, _ in vocab), encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt"))  # one that gives token types
    ref, mt = " ".join(["cat"] * ref_words), " ".join(["mat"] * mt_words)
    a = tokenizer(ref, add_special_tokens=False)["input_ids"]
    b = tokenizer(mt, add_special_tokens=False)["input_ids"]
    while len(a) + len(b) > max_length - 3:
        (a if len(a) > len(b) else b).pop()
    expected = [tokenizer.cls_token_id, *a, tokenizer.sep_token_id, *b, tokenizer.sep_token_id]
    ids, types = encode_pairs(tokenizer, [ref, "a cat"], [mt, "a mat"], max_length)
    assert ids[0] == expected and types[0] == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert ids[1] == tokenizer("a cat", "a mat")["input_ids"]  # short pairs stay whole
    batch = CrossEncoderCollate(tokenizer, max_length, [], {}, {})([{"ref": ref, "mt": mt, "index": 0}])
    assert batch["inputs"]["input_ids"][0].tolist() == expected
