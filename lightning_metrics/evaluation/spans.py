"""Error-span detection scored at the character level, as the WMT23 QE shared task's error-span task
(Blain et al. 2023) scores it: micro-averaged over every character of every segment.

A character is predicted (or annotated) in error when any span covers it, at that span's severity.
``tp`` counts the characters both mark; precision is ``tp`` over the predicted characters, recall
``tp`` over the annotated ones, F1 their harmonic mean (0 when either is 0). Two variants:

- ``severity ignored``: any predicted severity matches any annotated one;
- ``severity must match``: a character counts only when the severities are equal (the shared task's
  script gave a mismatch half a point; here it gets none).

Intervals come from a bootstrap over segments (the per-segment counts resampled together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lightning_metrics.spans import character_levels

VARIANTS = ("severity ignored", "severity must match")


def span_counts(predicted: Sequence[Sequence[dict]], annotated: Sequence[Sequence[dict]], mt: Sequence[str]):
    """``[n, 4]`` per-segment counts: true positives ignoring severity, true positives with the severity
    matching, predicted characters, annotated characters."""
    if not len(predicted) == len(annotated) == len(mt):
        raise ValueError(f"{len(predicted)} predictions, {len(annotated)} annotations and {len(mt)} texts differ")
    counts = np.zeros((len(mt), 4), dtype=np.int64)
    for i, (pred, gold, text) in enumerate(zip(predicted, annotated, mt)):
        p, g = character_levels(pred, len(text)), character_levels(gold, len(text))
        hit = (p > 0) & (g > 0)
        counts[i] = (hit.sum(), (hit & (p == g)).sum(), (p > 0).sum(), (g > 0).sum())
    return counts


def prf(tp: float, predicted: float, annotated: float) -> tuple[float, float, float]:
    """Precision, recall and F1 from character counts (0 where undefined)."""
    precision = tp / predicted if predicted else 0.0
    recall = tp / annotated if annotated else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


@dataclass
class SpanScores:
    """Precision, recall and F1 per variant, each F1 with its bootstrap interval."""

    values: dict  # variant -> {"precision", "recall", "f1", "f1_low", "f1_high"}
    n: int

    def row(self, prefix: str = "") -> dict:
        """One flat row: ``f1``, ``f1_sev``, their intervals, precision and recall of both variants."""
        out = {}
        for variant, tag in zip(VARIANTS, ("", "_sev")):
            for key, value in self.values[variant].items():
                name = key.replace("f1", f"f1{tag}") if key.startswith("f1") else f"{key}{tag}"
                out[prefix + name] = value
        return out


def span_scores(counts: np.ndarray, resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> SpanScores:
    """Both variants' precision, recall and F1 from :func:`span_counts`, with ``1 - alpha`` bootstrap
    intervals for F1 over ``resamples`` draws of the segments."""
    n = len(counts)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(resamples, n)) if n else np.zeros((0, 0), dtype=int)
    values = {}
    for variant, column in zip(VARIANTS, (0, 1)):
        tp, pred, gold = counts[:, column].sum(), counts[:, 2].sum(), counts[:, 3].sum()
        precision, recall, f1 = prf(tp, pred, gold)
        totals = counts[draws].sum(axis=1) if n else np.zeros((0, 4))
        boot = [prf(t[column], t[2], t[3])[2] for t in totals]
        low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2]) if boot else (np.nan, np.nan)
        values[variant] = {"precision": precision, "recall": recall, "f1": f1, "f1_low": low, "f1_high": high}
    return SpanScores(values, n)


def mark_nothing(mt: Sequence[str]) -> list[list[dict]]:
    """The baseline that marks no error."""
    return [[] for _ in mt]


def mark_every_word(mt: Sequence[str], severity: str = "minor") -> list[list[dict]]:
    """The baseline that marks every word (a run of non-space characters) at ``severity``."""
    import re

    return [[{"start": m.start(), "end": m.end(), "severity": severity} for m in re.finditer(r"\S+", t)] for t in mt]
