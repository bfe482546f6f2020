"""MetricX imported from a folder as Hugging Face holds it, scored in every mode equal to transformers' own
mT5 (MT5ForConditionalGeneration, one decoder step, logit 250089, the clamp), and used downstream where
lower is better: reranking, ensembles, evaluation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from metricx_fixtures import build_metricx, build_tokenizer, independent_scores

from lightning_metrics.cli.main import main
from lightning_metrics.encoders.template import template_text
from lightning_metrics.importers import import_metric
from lightning_metrics.metrics import load_metric

SRC = ["Der Zug ist heute zwanzig Minuten zu spät.", "Die Katze sitzt auf der Matte.", "Bitte schließ das Fenster."]
MT = [
    "The train is twenty minutes late today.",
    "The cat sits on the mat.",
    "Please close the window before you leave.",
]
REF = [
    "The train to Berlin is running twenty minutes late today.",
    "The cat is on the mat.",
    "Please close the window.",
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("mt5-tokenizer"))


@pytest.fixture(scope="module")
def metricx24(tmp_path_factory, tokenizer):
    return build_metricx(tmp_path_factory.mktemp("models") / "metricx-24-hybrid-tiny", tokenizer)


@pytest.mark.parametrize(
    "version, mode", [("24", "both"), ("24", "reference"), ("24", "qe"), ("23", "reference"), ("23", "qe")]
)
def test_every_mode_equals_transformers_mt5(tmp_path, tokenizer, metricx24, version, mode):
    folder = import_metric(metricx24, tmp_path / "x", tokenizer=str(tokenizer), version=version, mode=mode)
    meta = json.loads((folder / "metric.json").read_text())
    assert meta["higher_is_better"] is False and meta["hyper_parameters"]["version"] == version
    assert meta["max_length"] == (1536 if version == "24" else 1024)
    for max_length in (1536, 30):  # 30 tokens cut every row, as MetricX cuts them
        metric = load_metric(str(folder), max_length=max_length)
        rows = {"src": SRC, "mt": MT, "ref": REF}
        ours = metric.score(**{f: rows[f] for f in metric.inputs}).scores
        texts = [template_text(version, mode, {f: rows[f][i] for f in rows}) for i in range(3)]
        theirs = independent_scores(metricx24, tokenizer, texts, max_length)
        assert np.allclose(ours, theirs, atol=1e-5)
        assert len({round(v, 3) for v in theirs}) == 3 and sum(0 < v < 25 for v in theirs) >= 2  # not the clamp
    assert texts[0].startswith({"24": "source: ", "23": "candidate: "}[version])


def test_tied_embeddings_and_a_bfloat16_checkpoint(tmp_path, tokenizer):
    tied = build_metricx(tmp_path / "metricx-24-tied", tokenizer, tied=True)
    half = build_metricx(tmp_path / "metricx-24-bf16", tokenizer, dtype=torch.bfloat16, seed=1)
    for source in (tied, half):
        folder = import_metric(source, tmp_path / f"{source.name}-out", tokenizer=str(tokenizer))
        texts = [template_text("24", "both", {"src": s, "mt": m, "ref": r}) for s, m, r in zip(SRC, MT, REF)]
        expected = independent_scores(source, tokenizer, texts, 1536)
        assert np.allclose(load_metric(str(folder)).score(src=SRC, mt=MT, ref=REF).scores, expected, atol=1e-5)
    bf16 = load_metric(str(tmp_path / f"{half.name}-out"), precision="bf16").score(src=SRC, mt=MT, ref=REF).scores
    # bf16 rounds every activation (more so with this fitted head row): close, and in the same order
    assert np.allclose(bf16, expected, atol=2.5) and np.argsort(bf16).tolist() == np.argsort(expected).tolist()


def test_not_metricx_and_a_vocabulary_without_the_score_id_are_one_line(tmp_path, tokenizer, metricx24, capsys):
    small = tmp_path / "metricx-24-small"
    small.mkdir()
    config = json.loads((metricx24 / "config.json").read_text())
    (small / "config.json").write_text(json.dumps({**config, "vocab_size": 32128}))
    assert main(["import", str(small), "--out", str(tmp_path / "o"), "--tokenizer", str(tokenizer)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds no id 250089" in err and str(small) in err
    (small / "config.json").write_text(json.dumps({**config, "architectures": ["MT5ForConditionalGeneration"]}))
    assert main(["import", str(small), "--out", str(tmp_path / "o")]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a checkpoint this code imports" in err
    unnamed = tmp_path / "mymodel"
    unnamed.symlink_to(metricx24, target_is_directory=True)
    assert main(["import", str(unnamed), "--out", str(tmp_path / "o"), "--tokenizer", str(tokenizer)]) != 0
    assert "give --metricx-version 23 or 24" in capsys.readouterr().err


def test_lower_is_better_in_rerank_ensembles_and_evaluate(tmp_path, tokenizer, metricx24, capsys):
    qe = import_metric(metricx24, tmp_path / "qe", tokenizer=str(tokenizer), mode="qe")
    (tmp_path / "src.txt").write_text("".join(s + "\n" for s in SRC[:2]))
    (tmp_path / "cands.txt").write_text("".join(c + "\n" for c in [*MT[:2], *REF[:2]]))  # two per source, in order
    rerank = ["rerank", "--model", str(qe), "-s", str(tmp_path / "src.txt"), "-t", str(tmp_path / "cands.txt")]
    assert main([*rerank, "--num-candidates", "2", "--mode", "qe", "--json", str(tmp_path / "r.json")]) == 0
    scores = load_metric(str(qe)).score(src=[SRC[0], SRC[0], SRC[1], SRC[1]], mt=[MT[0], MT[1], REF[0], REF[1]]).scores
    chosen = json.loads((tmp_path / "r.json").read_text())
    groups = [[MT[0], MT[1]], [REF[0], REF[1]]]  # the file's candidates, two per source
    lowest = [int(np.argmin([scores[0], scores[1]])), int(np.argmin([scores[2], scores[3]]))]
    assert [c["text"] for c in chosen["choices"]] == [groups[k][lowest[k]] for k in range(2)]


def test_an_ensemble_with_chrf_orders_systems_as_both_members_where_they_agree(tmp_path, tokenizer, metricx24):
    from itertools import combinations

    from conftest import TINY_CORPUS

    from lightning_metrics.metrics.ensemble_export import export_ensemble

    folder = import_metric(metricx24, tmp_path / "mx", tokenizer=str(tokenizer))
    refs, srcs = TINY_CORPUS[:8], [s.upper() for s in TINY_CORPUS[:8]]
    systems = {  # four systems of one test set, from the reference itself to unrelated sentences
        "copy": refs,
        "cut": [" ".join(r.split()[: len(r.split()) // 2]) for r in refs],
        "shuffled": [" ".join(reversed(r.split())) for r in refs],
        "unrelated": TINY_CORPUS[8:] + TINY_CORPUS[:2],
    }
    table = {"src": srcs * 4, "mt": [m for s in systems.values() for m in s], "ref": refs * 4}
    ensemble = export_ensemble([f"mx={folder}", "chrf"], tmp_path / "ens", table)
    members = {"mx": load_metric(str(folder)), "chrf": load_metric("chrf"), "ens": load_metric(str(ensemble))}
    quality = {}  # system scores oriented so that higher is better
    for name, metric in members.items():
        sign = 1.0 if metric.higher_is_better else -1.0
        quality[name] = {s: sign * metric.score(mt=mt, ref=refs, src=srcs).system_score for s, mt in systems.items()}
    assert members["mx"].higher_is_better is False and members["ens"].higher_is_better is True
    agreed = 0
    for a, b in combinations(systems, 2):
        mx, chrf = (np.sign(quality[m][a] - quality[m][b]) for m in ("mx", "chrf"))
        if mx == chrf != 0:
            agreed += 1
            assert np.sign(quality["ens"][a] - quality["ens"][b]) == mx, (a, b)
    assert agreed >= 2  # the check above ran on real agreements


def test_the_in_house_recipe_adapts_an_import_with_adapters_and_the_export_scores_without_peft(
    tmp_path, tokenizer, metricx24, monkeypatch
):
    """import -> fit --config configs/recipes/metricx-in-house.yaml -> the export (adapters merged) scores as
    the fitted model with its adapters in place -> interpolate with the start."""
    from conftest import REPO
    from test_workflow import lm, ok

    from lightning_metrics.encoders.sequences import pad_sequences
    from lightning_metrics.encoders.template import encode_template
    from lightning_metrics.models import MetricXRegressor

    ok(lm(tmp_path, "import", metricx24, "--out", "checkpoints/metricx", "--tokenizer", tokenizer))
    rows = ["src,mt,ref,score,lp,doc_id"] + [
        f'"{s}","{m}","{r}",{-float(i % 5)},de-en,d{i % 3}'
        for i, (s, m, r) in enumerate(zip(SRC * 4, MT * 4, REF[::-1] * 4))
    ]
    for name in ("in_house_train.csv", "in_house_dev.csv"):
        (tmp_path / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    fit = [
        *("fit", "--config", REPO / "configs/recipes/metricx-in-house.yaml", "--trainer.max_steps", "3"),
        *(
            "--trainer.val_check_interval",
            "1",
            "--trainer.accelerator",
            "cpu",
            "--data.init_args.batches.max_length",
            "64",
        ),
        *("--data.init_args.batches.num_workers", "0"),
        *("--model.init_args.optim.lr_encoder", "1e-5"),
    ]  # fmt: skip  (tiny model: small steps keep it off the clamp)
    ok(lm(tmp_path, *fit))
    export = tmp_path / "checkpoints" / "metricx-in-house"
    last = next(tmp_path.glob("runs/metricx-in-house/lightning_logs/version_0/checkpoints/last.ckpt"))
    monkeypatch.chdir(tmp_path)  # the checkpoint names its start as the recipe does, by a relative folder
    model = MetricXRegressor.load_from_checkpoint(last, weights_only=True, map_location="cpu").eval()
    assert any("lora_" in name for name, _ in model.named_parameters())  # peft's adapters, not merged
    metric = load_metric(str(export), max_length=64)
    encoded = encode_template(metric.tokenizer, "24", "both", {"src": SRC, "mt": MT, "ref": REF}, 64)
    with torch.no_grad():
        unmerged = model.predict_scores({"inputs": pad_sequences(metric.tokenizer, encoded.ids)}).tolist()
    merged = metric.score(src=SRC, mt=MT, ref=REF).scores
    assert np.allclose(merged, unmerged, atol=1e-5)
    start = load_metric(str(tmp_path / "checkpoints" / "metricx"), max_length=64).score(src=SRC, mt=MT, ref=REF).scores
    assert not np.allclose(merged, start, atol=1e-6)  # the adapters moved it
    mix = [
        "interpolate",
        "checkpoints/metricx",
        "checkpoints/metricx-in-house",
        "--alpha",
        "0.5",
        "--out",
        "checkpoints/mix",
    ]
    ok(lm(tmp_path, *mix))
    assert load_metric(str(tmp_path / "checkpoints" / "mix")).higher_is_better is False
