"""The signals recorded for each (reference, candidate) pair, and the target score.

Lexical signals keep their tools' scales: ``bleu`` and ``chrf`` 0-100 (sacrebleu sentence
scores), ``rouge1``/``rouge2``/``rougeL`` F-measure 0-1 (rouge-score). ``bertscore_p/r/f`` come
from :class:`lightning_metrics.bertscore.BERTScorer`. The target ``score`` is ``1 - severity``.
"""

from __future__ import annotations

from typing import Sequence

from lightning_metrics import lexical

LEXICAL_SIGNALS = ("bleu", "chrf", "rouge1", "rouge2", "rougeL")
BERTSCORE_SIGNALS = ("bertscore_p", "bertscore_r", "bertscore_f")
ALL_SIGNALS = LEXICAL_SIGNALS + BERTSCORE_SIGNALS


def score_from_severity(severity: float) -> float:
    """The regression target: 1 for an unchanged reference, 0 for an unrelated sentence."""
    return 1.0 - severity


def lexical_signals(refs: Sequence[str], mts: Sequence[str], names: Sequence[str] = LEXICAL_SIGNALS) -> dict[str, list[float]]:
    """The requested lexical signals for each pair (single process; the pipeline parallelises)."""
    out: dict[str, list[float]] = {}
    if "bleu" in names:
        out["bleu"] = lexical.sentence_bleu(mts, refs)
    if "chrf" in names:
        out["chrf"] = lexical.sentence_chrf(mts, refs)
    if any(n.startswith("rouge") for n in names):
        rouge = lexical.sentence_rouge(mts, refs)
        out.update({t: rouge[t]["fmeasure"] for t in lexical.ROUGE_TYPES if t in names})
    return out


def bertscore_signals(refs: Sequence[str], mts: Sequence[str], scorer) -> dict[str, list[float]]:
    """BERTScore precision, recall and F1 for each pair, from a ready ``BERTScorer``."""
    result = scorer.score(mts, refs)
    return {"bertscore_p": result.precision.tolist(), "bertscore_r": result.recall.tolist(), "bertscore_f": result.f1.tolist()}
