"""BERTScore: parity with the bert-score package, the DESIGN.md worked example, edge cases, IDF,
baseline rescaling, and the CLI."""

import json
import math
import re

import bert_score
import numpy as np
import pytest
import torch

from lightning_metrics.baselines.bertscore import BERTScorer, default_layer, greedy_match, idf_weights
from lightning_metrics.baselines.rescaling import compute_baseline
from lightning_metrics.cli.main import main
from lightning_metrics.encoders.loading import resolve_encoder

HAND = [
    ("The cat sat on the mat.", "The cat is on the mat."),
    ("A dog ran fast across the field.", "A quick brown fox jumps over the lazy dog."),
    ("She left her umbrella on the bus.", "She left her umbrella on the bus."),
    ("It never rains here.", "It never rains here in the summer."),
]


def test_worked_example_through_the_metric_aggregation():
    # DESIGN.md: candidate rows "a" 1.00, "canine" .92, "ran" .88, "fast" .72 (row maxima);
    # the reference's three tokens are best matched at 1.00, .92, .88.
    sim = torch.tensor([[[1.00, 0.10, 0.10], [0.10, 0.92, 0.10], [0.10, 0.10, 0.88], [0.10, 0.20, 0.72]]])
    p, r, f = greedy_match(sim, torch.ones(1, 4), torch.ones(1, 3))
    assert p.item() == pytest.approx(0.8800, abs=5e-5)
    assert r.item() == pytest.approx(0.9333, abs=5e-5)
    assert f.item() == pytest.approx(0.9059, abs=5e-5)


def test_special_tokens_can_match_but_do_not_count():
    sim = torch.tensor([[[0.9, 0.2], [0.3, 0.5]]])  # token 0 of each side is a special token
    p, r, _ = greedy_match(sim, torch.tensor([[0.0, 1.0]]), torch.tensor([[0.0, 1.0]]))
    assert p.item() == pytest.approx(0.5) and r.item() == pytest.approx(0.5)


def _theirs(folder, layer, cands, refs, idf):
    scorer = bert_score.BERTScorer(
        model_type=str(folder), num_layers=layer, idf=idf, idf_sents=refs if idf else None, lang="en", batch_size=32
    )
    return [t.numpy() for t in scorer.score(cands, refs)]


@pytest.mark.parametrize("idf", [False, True])
def test_parity_with_bert_score_on_200_real_pairs(da_rows, idf):
    cands, refs = [r["mt"] for r in da_rows], [r["ref"] for r in da_rows]
    ours = BERTScorer("default", layer=4, idf=idf, batch_size=32).score(cands, refs)
    P, R, F = _theirs(resolve_encoder("default"), 4, cands, refs, idf)
    assert len(ours.f1) == 200
    assert np.abs(ours.precision - P).max() < 1e-4
    assert np.abs(ours.recall - R).max() < 1e-4
    assert np.abs(ours.f1 - F).max() < 1e-4


@pytest.mark.parametrize("idf", [False, True])
def test_parity_on_the_tiny_encoder(tiny_encoder, idf):
    cands, refs = [c for c, _ in HAND], [r for _, r in HAND]
    ours = BERTScorer(tiny_encoder, layer=1, idf=idf).score(cands, refs)
    P, R, F = _theirs(tiny_encoder, 1, cands, refs, idf)
    assert np.abs(ours.f1 - F).max() < 1e-5 and np.abs(ours.precision - P).max() < 1e-5


def test_identical_sentences_score_one_and_rescale_to_one(tiny_encoder):
    sentences = [c for c, _ in HAND]
    scorer = BERTScorer(tiny_encoder, baseline={"P": 0.3, "R": 0.4, "F": 0.35})
    result = scorer.score(sentences, sentences)
    assert np.allclose(result.f1, 1.0, atol=1e-5) and np.allclose(result.precision, 1.0, atol=1e-5)
    raw = BERTScorer(tiny_encoder).score(sentences, sentences)
    assert np.allclose(raw.f1, 1.0, atol=1e-5)


def test_empty_candidate_scores_zero(tiny_encoder):
    # documented: no tokens besides specials -> P = R = F = 0 (the bert-score package's rule; its
    # own empty-string path no longer runs on transformers 5 tokenizers, so the value is pinned here)
    cands, refs = ["", "   ", "The cat sat on the mat."], ["The cat is on the mat."] * 3
    ours = BERTScorer(tiny_encoder, layer=2).score(cands, refs)
    assert list(ours.precision[:2]) == list(ours.recall[:2]) == list(ours.f1[:2]) == [0.0, 0.0]
    P, R, F = _theirs(tiny_encoder, 2, cands[2:], refs[2:], False)
    assert abs(ours.f1[2] - F[0]) < 1e-5
    rescaled = BERTScorer(tiny_encoder, layer=2, baseline={"P": 0.5, "R": 0.5, "F": 0.5}).score(cands, refs)
    assert rescaled.f1[0] == pytest.approx(-1.0)  # (0 - b) / (1 - b)


def test_idf_formula():
    table, unseen = idf_weights([[1, 2, 2], [2, 3], [2]])
    assert table[2] == pytest.approx(math.log(4 / 4))
    assert table[1] == pytest.approx(math.log(4 / 2))
    assert unseen == pytest.approx(math.log(4))


def test_chunks_and_batches_do_not_change_scores(tiny_encoder):
    cands = [c for c, _ in HAND] * 5
    refs = [r for _, r in HAND] * 5
    one = BERTScorer(tiny_encoder, batch_size=64).score(cands, refs)
    many = BERTScorer(tiny_encoder, batch_size=3, chunk_pairs=7).score(cands, refs)
    assert np.allclose(one.f1, many.f1, atol=1e-6)


def test_default_layers():
    assert default_layer("default", 6) == 4
    assert default_layer("roberta-large", 24) == 17
    assert default_layer("/models/some-unknown-encoder", 12) == 12


def test_baseline_is_seeded_and_rescales(tiny_encoder, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(c for pair in HAND for c in pair) + "\n", encoding="utf-8")
    out = tmp_path / "baseline.json"
    args = [
        "bertscore-baseline",
        "--model",
        str(tiny_encoder),
        "--layer",
        "2",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--n-pairs",
        "50",
    ]
    assert main(args) == 0
    first = json.loads(out.read_text())
    assert main(args) == 0
    assert json.loads(out.read_text()) == first
    assert 0 < first["F"] < 1 and first["n_pairs"] == 50 and first["layer"] == 2
    scorer = BERTScorer(tiny_encoder, layer=2)
    again = compute_baseline(scorer, corpus.read_text().splitlines(), n_pairs=50, seed=1)
    assert again["F"] != first["F"]
    raw = BERTScorer(tiny_encoder, layer=2).score(["The cat sat."], ["A dog ran."]).f1[0]
    rescaled = BERTScorer(tiny_encoder, layer=2, baseline=out).score(["The cat sat."], ["A dog ran."]).f1[0]
    assert rescaled == pytest.approx((raw - first["F"]) / (1 - first["F"]))
    assert "bertscore|model:" in capsys.readouterr().out


def test_evaluate_bertscore_rows(tiny_encoder, tmp_path, capsys):
    data = tmp_path / "r.csv"
    rows = ["mt,ref,score,lp"] + [
        f'"{c}","{r}",{i / 3},{"a-b" if i % 2 else "c-d"}' for i, (c, r) in enumerate(HAND * 2)
    ]
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = [
        "evaluate",
        "--data",
        str(data),
        "--metrics",
        "chrf",
        f"bertscore=bertscore:model={tiny_encoder},layer=1",  # LABEL=SPEC: the table names it bertscore
        f"bertscore_p=bertscore_p:model={tiny_encoder},layer=1",
        "--group",
        "lp",
        "--bootstrap",
        "0",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    from sacrebleu.metrics import CHRF
    from scipy.stats import kendalltau

    pairs = HAND * 2
    scorer = BERTScorer(tiny_encoder, layer=1)
    computed = scorer.score([c for c, _ in pairs], [r for _, r in pairs])
    independent = {  # each metric's own numbers, correlated by scipy, per group
        "chrf": [CHRF().sentence_score(c, [r]).score for c, r in pairs],
        "bertscore": computed.f1.tolist(),
        "bertscore_p": computed.precision.tolist(),
    }
    for metric, group in (("chrf", "a-b"), ("bertscore", "a-b"), ("bertscore_p", "c-d")):
        rows = [i for i in range(len(pairs)) if (i % 2 == 1) == (group == "a-b")]
        tau = kendalltau([independent[metric][i] for i in rows], [i / 3 for i in rows], variant="b")[0]
        assert re.search(rf"^{metric}\s+{group}\s+{tau:.4f}\s", out, re.M), (metric, group, tau)


def test_bad_layer_and_unknown_model(tiny_encoder, tmp_path, capsys):
    with pytest.raises(Exception, match="layer 9 is out of range"):
        BERTScorer(tiny_encoder, layer=9)
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b\nc d\n", encoding="utf-8")
    assert (
        main(
            [
                "bertscore-baseline",
                "--model",
                str(tmp_path / "none"),
                "--corpus",
                str(corpus),
                "--out",
                str(tmp_path / "b.json"),
            ]
        )
        == 2
    )
    assert "not found; tried: local folder" in capsys.readouterr().err


def test_the_signature_needs_no_encoder_and_a_call_keeps_nothing(tiny_encoder, monkeypatch):
    from lightning_metrics.baselines import bertscore as module
    from lightning_metrics.encoders.inference import ScoreOptions
    from lightning_metrics.metrics import load_metric

    metric = load_metric(f"bertscore:model={tiny_encoder},layer=1")
    real = module.BERTScorer
    monkeypatch.setattr(module, "BERTScorer", lambda *a, **k: pytest.fail("the signature loaded an encoder"))
    before = metric.signature
    monkeypatch.setattr(module, "BERTScorer", real)
    result = metric.score(mt=["The cat sat."], ref=["The cat is on the mat."], batch_size=1, progress=False)
    assert str(before) == result.signature  # the same settings, read from the config alone
    scorer = metric.scorer(ScoreOptions(device="cpu"))
    assert (scorer.batch_size, scorer.progress) == (None, None)  # the call's batch size and progress stayed with it
