"""Several references: BLEU and chrF equal sacrebleu's multi-reference scores, BERTScore takes
the best reference per segment as bert-score does, learned metrics combine per-reference scores
(max of two identical references = the single-reference score), and the signature says nrefs."""

from __future__ import annotations

import pytest
import sacrebleu
from conftest import export_tiny

from lightning_metrics.cli.main import main
from lightning_metrics.metrics import load_metric
from lightning_metrics.models import CometEstimator


@pytest.fixture(scope="module")
def two_refs(document_rows):
    """40 real outputs; the second reference of each is another system's output for the same source."""
    by_src: dict[str, list[dict]] = {}
    for r in document_rows:
        by_src.setdefault(r["src"], []).append(r)
    rows = [(g[0]["mt"], g[0]["ref"], g[1]["mt"], g[0]["src"]) for g in by_src.values() if len(g) > 1][:40]
    assert len(rows) >= 10
    return [r[0] for r in rows], [[r[1], r[2]] for r in rows], [r[3] for r in rows]


@pytest.mark.parametrize("name", ["bleu", "chrf"])
def test_lexical_multi_reference_equals_sacrebleu(two_refs, name):
    mt, refs, _ = two_refs
    result = load_metric(name).score(mt=mt, ref=refs)
    streams = [[r[0] for r in refs], [r[1] for r in refs]]
    corpus = sacrebleu.corpus_bleu(mt, streams) if name == "bleu" else sacrebleu.corpus_chrf(mt, streams)
    sentence = [
        (sacrebleu.sentence_bleu if name == "bleu" else sacrebleu.sentence_chrf)(m, rs).score for m, rs in zip(mt, refs)
    ]
    assert result.system_score == pytest.approx(corpus.score, abs=1e-9)
    assert result.scores == pytest.approx(sentence, abs=1e-9)
    assert "nrefs:2" in result.signature


def test_bertscore_takes_the_best_reference(two_refs, tiny_encoder):
    mt, refs, _ = two_refs
    metric = load_metric("bertscore", model=str(tiny_encoder))
    both = metric.score(mt=mt, ref=refs).scores
    first = metric.score(mt=mt, ref=[r[0] for r in refs]).scores
    second = metric.score(mt=mt, ref=[r[1] for r in refs]).scores
    assert both == pytest.approx([max(a, b) for a, b in zip(first, second)], abs=1e-6)


def test_learned_metric_combines_per_reference_scores(two_refs, tiny_encoder, da_rows, write_csv, tmp_path, capsys):
    mt, refs, src = two_refs
    data = write_csv(tmp_path / "r.csv", da_rows[:32])
    metric = load_metric(
        str(export_tiny(CometEstimator(encoder=str(tiny_encoder)), tiny_encoder, data, tmp_path, "est"))
    )
    single = metric.score(mt=mt, ref=[r[0] for r in refs], src=src)
    doubled = metric.score(mt=mt, ref=[[r[0], r[0]] for r in refs], src=src)
    assert doubled.scores == pytest.approx(single.scores, abs=1e-6) and "nrefs:2|multi_ref:max" in doubled.signature
    other = metric.score(mt=mt, ref=[r[1] for r in refs], src=src).scores
    mean = metric.score(mt=mt, ref=refs, src=src, multi_ref="mean").scores
    assert mean == pytest.approx([(a + b) / 2 for a, b in zip(single.scores, other)], abs=1e-6)
    # the CLI: -r takes several files; a reference file with another line count is one line naming it
    for name, lines in (
        ("mt", mt),
        ("r1", [r[0] for r in refs]),
        ("r2", [r[1] for r in refs]),
        ("src", src),
        ("short", src[:-1]),
    ):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    assert (
        main(
            [
                "score",
                "--model",
                "chrf",
                "-t",
                str(tmp_path / "mt.txt"),
                "-r",
                str(tmp_path / "r1.txt"),
                str(tmp_path / "r2.txt"),
                "--quiet",
                "true",
            ]
        )
        == 0
    )
    assert "nrefs:2" in capsys.readouterr().out
    assert (
        main(
            [
                "score",
                "--model",
                "chrf",
                "-t",
                str(tmp_path / "mt.txt"),
                "-r",
                str(tmp_path / "r1.txt"),
                str(tmp_path / "short.txt"),
            ]
        )
        != 0
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "short.txt has" in err and "line counts differ" in err, err
