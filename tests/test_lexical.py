"""Lexical baselines: the DESIGN.md worked values, and parity with sacrebleu / rouge-score."""

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from lightning_metrics.baselines import lexical

HYP = "it is a guide to action which ensures that the military always obeys the commands of the party"
REF = "it is a guide to action that ensures that the military will forever heed party commands"


def test_bleu4_worked_example():
    # DESIGN.md: BLEU-4 = 0.4209 with whitespace tokens and no smoothing
    score = lexical.sentence_bleu([HYP], [REF], tokenize="none", smooth_method="none")[0]
    assert score / 100 == pytest.approx(0.4209, abs=5e-5)
    assert lexical.corpus_bleu([HYP], [REF], tokenize="none", smooth_method="none") / 100 == pytest.approx(
        0.4209, abs=5e-5
    )


def test_rouge_l_worked_example():
    scores = lexical.sentence_rouge(["the cat sat on the mat"], ["the cat is on the mat"])
    assert scores["rougeL"]["precision"][0] == pytest.approx(5 / 6)
    assert scores["rougeL"]["recall"][0] == pytest.approx(5 / 6)
    assert scores["rougeL"]["fmeasure"][0] == pytest.approx(0.8333, abs=5e-5)


def test_sentence_scores_equal_sacrebleu_on_real_rows(da_rows):
    hyps, refs = [r["mt"] for r in da_rows], [r["ref"] for r in da_rows]
    ours_bleu, ours_chrf = lexical.sentence_bleu(hyps, refs), lexical.sentence_chrf(hyps, refs)
    for h, r, b, c in zip(hyps, refs, ours_bleu, ours_chrf):
        assert b == sacrebleu.sentence_bleu(h, [r]).score
        assert c == sacrebleu.sentence_chrf(h, [r]).score
    assert lexical.corpus_bleu(hyps, refs) == sacrebleu.corpus_bleu(hyps, [refs]).score
    assert lexical.corpus_chrf(hyps, refs) == sacrebleu.corpus_chrf(hyps, [refs]).score


def test_parallel_scoring_equals_serial(da_rows):
    hyps, refs = [r["mt"] for r in da_rows] * 25, [r["ref"] for r in da_rows] * 25  # 5,000 pairs: 2 chunks
    assert lexical.sentence_chrf(hyps, refs, num_proc=2) == lexical.sentence_chrf(hyps, refs)


def test_rouge_equals_rouge_score(da_rows):
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    hyps, refs = [r["mt"] for r in da_rows[:50]], [r["ref"] for r in da_rows[:50]]
    ours = lexical.sentence_rouge(hyps, refs)
    for i, (h, r) in enumerate(zip(hyps, refs)):
        theirs = scorer.score(r, h)
        for t in lexical.ROUGE_TYPES:
            assert ours[t]["fmeasure"][i] == theirs[t].fmeasure
            assert ours[t]["precision"][i] == theirs[t].precision


def test_multiple_references():
    hyp, refs = "the cat sat on the mat", ["a dog is here", "the cat sat on a mat"]
    assert lexical.sentence_bleu([hyp], [refs])[0] == sacrebleu.sentence_bleu(hyp, refs).score
    assert lexical.sentence_chrf([hyp], [refs])[0] == sacrebleu.sentence_chrf(hyp, refs).score
    multi = lexical.sentence_rouge([hyp], [refs])
    best = rouge_scorer.RougeScorer(["rougeL"]).score_multi(refs, hyp)["rougeL"].fmeasure
    assert multi["rougeL"]["fmeasure"][0] == best
    assert (
        lexical.corpus_bleu([hyp, hyp], [refs, refs])
        == sacrebleu.corpus_bleu([hyp, hyp], [[refs[0]] * 2, [refs[1]] * 2]).score
    )


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        lexical.sentence_bleu(["a", "b"], ["a"])
