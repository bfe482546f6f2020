"""The signals ``generate`` records for each (reference, candidate) pair, and the target score.

The signals are the built-in metrics under their names, computed through
:mod:`lightning_metrics.baselines.scores` (the one route every baseline value takes): ``bleu`` and
``chrf`` 0-100 (sacrebleu sentence scores), ``rouge1``/``rouge2``/``rougeL`` F-measure 0-1
(rouge-score), ``bertscore_p/r/f`` (BERTScore). The target ``score`` is ``1 - severity``.
"""

from __future__ import annotations

from typing import Sequence

from lightning_metrics.baselines.scores import baseline_scores, family_scores
from lightning_metrics.baselines.signals import ALL_SIGNALS, BERTSCORE_SIGNALS, LEXICAL_SIGNALS

__all__ = ["ALL_SIGNALS", "BERTSCORE_SIGNALS", "LEXICAL_SIGNALS", "bertscore_signals", "lexical_signals"]


def score_from_severity(severity: float) -> float:
    """The regression target: 1 for an unchanged reference, 0 for an unrelated sentence."""
    return 1.0 - severity


def lexical_signals(
    refs: Sequence[str], mts: Sequence[str], names: Sequence[str] = LEXICAL_SIGNALS
) -> dict[str, list[float]]:
    """The requested lexical signals for each pair (single process; the pipeline parallelises)."""
    return baseline_scores([n for n in names if n in LEXICAL_SIGNALS], mts, refs)


def bertscore_signals(refs: Sequence[str], mts: Sequence[str], scorer) -> dict[str, list[float]]:
    """BERTScore precision, recall and F1 for each pair, from a ready ``BERTScorer``."""
    return family_scores("bertscore", mts, refs, scorer=scorer)
