"""The baseline metrics by name, behind one call: ``baseline_scores(names, mt=..., ref=...)``.

Metrics that come out of one computation (ROUGE-1/2/L; BERTScore F/P/R) form a family and
are computed once however many of its members are asked for.
"""

from __future__ import annotations

from typing import Callable, Sequence

from lightning_metrics import lexical


def _bleu(mt, ref, num_proc=1, **_):
    return {"bleu": lexical.sentence_bleu(mt, ref, num_proc=num_proc)}


def _chrf(mt, ref, num_proc=1, **_):
    return {"chrf": lexical.sentence_chrf(mt, ref, num_proc=num_proc)}


def _rouge(mt, ref, num_proc=1, **_):
    scores = lexical.sentence_rouge(mt, ref, num_proc=num_proc)
    return {t: scores[t]["fmeasure"] for t in lexical.ROUGE_TYPES}


def _bertscore(mt, ref, bertscore: dict | None = None, **_):
    from lightning_metrics.bertscore import BERTScorer

    return BERTScorer(**(bertscore or {})).score(mt, ref).as_dict()


# family function, and the names it produces
FAMILIES: dict[str, tuple[Callable[..., dict[str, list[float]]], tuple[str, ...]]] = {
    "bleu": (_bleu, ("bleu",)),
    "chrf": (_chrf, ("chrf",)),
    "rouge": (_rouge, lexical.ROUGE_TYPES),
    "bertscore": (_bertscore, ("bertscore", "bertscore_p", "bertscore_r")),
}


def baseline_names() -> list[str]:
    """Every name :func:`baseline_scores` accepts."""
    return [name for _, names in FAMILIES.values() for name in names]


def baseline_scores(names: Sequence[str], mt: Sequence[str], ref: Sequence[str], **options) -> dict[str, list[float]]:
    """Segment scores for each named baseline.

    ``options``: ``num_proc`` for the lexical metrics; ``bertscore`` a dict of
    :class:`~lightning_metrics.bertscore.BERTScorer` arguments (model, layer, idf, ...).
    ``bertscore`` is F1, ``bertscore_p`` and ``bertscore_r`` precision and recall.
    """
    unknown = [n for n in names if n not in baseline_names()]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {baseline_names()}")
    out: dict[str, list[float]] = {}
    for fn, members in FAMILIES.values():
        if any(n in members for n in names):
            computed = fn(list(mt), list(ref), **options)
            out.update({n: computed[n] for n in members if n in names})
    return {n: out[n] for n in names}
