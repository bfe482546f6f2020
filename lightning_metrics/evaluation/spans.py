"""Error-span detection scored at the character level, micro-averaged over every character of every
segment, as the WMT23 QE shared task's error-span task (Blain et al. 2023) scores it, and two stricter
or looser variants beside it.

A character is predicted (or annotated) in error when a span covers it. ``tp`` counts the characters
both mark; precision is ``tp`` over the predicted characters, recall ``tp`` over the annotated ones, F1
their harmonic mean (0 when either is 0). Three variants:

- ``severity ignored``: any predicted severity matches any annotated one;
- ``severity must match``: a character counts only when the severities are equal (the highest one
  where spans overlap);
- ``WMT23``: the shared task's own rule (its ``task2_evaluate.py``): a character with the annotated
  severity counts 1, with the other severity 1/2 (critical counts as major, as the task had only minor
  and major; a character annotated both minor and major counts 1 for either), and an omission (a
  zero-length span at position ``p``) is the one character ``p``, where ``p`` may be the end of the text.

Intervals come from a bootstrap over segments, or over documents (``clusters``): the per-segment
counts of a draw are summed, so F1 stays micro-averaged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lightning_metrics.correlation import resample_rows
from lightning_metrics.spans import character_levels

VARIANTS = ("severity ignored", "severity must match", "WMT23")
TAGS = ("", "_sev", "_wmt23")  # the variants' suffixes in SpanScores.row
COLUMNS = ((0, 2, 3), (1, 2, 3), (4, 5, 6))  # each variant's (tp, predicted, annotated) in span_counts
MINOR, MAJOR = 1, 2  # WMT23's two channels, as bits


def wmt23_channels(spans: Sequence[dict], length: int) -> np.ndarray:
    """Per position of a text of ``length``, and one past its end: the bits of the severities that cover
    it (minor 1, major 2, critical as major), a zero-length span covering its own position."""
    bits = np.zeros(length + 1, dtype=np.int8)
    for span in spans:
        start, end = (min(max(0, int(span[k])), length) for k in ("start", "end"))
        bit = MINOR if span["severity"] == "minor" else MAJOR
        if int(span["start"]) == int(span["end"]):
            bits[start] |= bit
        elif end > start:
            bits[start:end] |= bit
    return bits


def wmt23_credit(predicted: np.ndarray, annotated: np.ndarray) -> float:
    """The WMT23 true positives of one text's channels: 1 for a predicted character whose severity the
    annotation has (or any, where it has both), 1/2 for the other severity."""
    hit = (predicted > 0) & (annotated > 0)
    full = hit & (((predicted & annotated) > 0) | (annotated == MINOR | MAJOR))
    return float(full.sum() + 0.5 * (hit & ~full).sum())


def span_counts(predicted: Sequence[Sequence[dict]], annotated: Sequence[Sequence[dict]], mt: Sequence[str]):
    """``[n, 7]`` per-segment counts: true positives ignoring severity and with the severity matching,
    predicted and annotated characters; then WMT23's true positives (half credits included), predicted
    and annotated positions (omissions included)."""
    if not len(predicted) == len(annotated) == len(mt):
        raise ValueError(f"{len(predicted)} predictions, {len(annotated)} annotations and {len(mt)} texts differ")
    counts = np.zeros((len(mt), 7), dtype=np.float64)
    for i, (pred, gold, text) in enumerate(zip(predicted, annotated, mt)):
        p, g = character_levels(pred, len(text)), character_levels(gold, len(text))
        hit = (p > 0) & (g > 0)
        p23, g23 = wmt23_channels(pred, len(text)), wmt23_channels(gold, len(text))
        counts[i] = (
            hit.sum(), (hit & (p == g)).sum(), (p > 0).sum(), (g > 0).sum(),
            wmt23_credit(p23, g23), (p23 > 0).sum(), (g23 > 0).sum(),
        )  # fmt: skip
    return counts


def prf(tp: float, predicted: float, annotated: float) -> tuple[float, float, float]:
    """Precision, recall and F1 from character counts (0 where undefined)."""
    precision = float(tp / predicted) if predicted else 0.0
    recall = float(tp / annotated) if annotated else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


@dataclass
class SpanScores:
    """Precision, recall and F1 per variant, each F1 with its bootstrap interval."""

    values: dict  # variant -> {"precision", "recall", "f1", "f1_low", "f1_high"}
    n: int

    def row(self, prefix: str = "") -> dict:
        """One flat row: ``f1``, ``f1_sev``, ``f1_wmt23``, their intervals, and each variant's precision
        and recall."""
        out = {}
        for variant, tag in zip(VARIANTS, TAGS):
            for key, value in self.values[variant].items():
                name = key.replace("f1", f"f1{tag}") if key.startswith("f1") else f"{key}{tag}"
                out[prefix + name] = value
        return out


def span_scores(
    counts: np.ndarray, resamples: int = 1000, seed: int = 0, alpha: float = 0.05, clusters: Sequence | None = None
) -> SpanScores:
    """Every variant's precision, recall and F1 from :func:`span_counts`, with ``1 - alpha`` bootstrap
    intervals for F1 over ``resamples`` draws of the segments (of whole documents with ``clusters``)."""
    totals = np.array([counts[idx].sum(axis=0) for idx in resample_rows(len(counts), resamples, seed, clusters)])
    values = {}
    for variant, (tp, pred, gold) in zip(VARIANTS, COLUMNS):
        precision, recall, f1 = prf(*counts[:, [tp, pred, gold]].sum(axis=0))
        boot = [prf(t[tp], t[pred], t[gold])[2] for t in totals]
        low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2]).tolist() if boot else (np.nan, np.nan)
        values[variant] = {"precision": precision, "recall": recall, "f1": f1, "f1_low": low, "f1_high": high}
    return SpanScores(values, len(counts))


def mark_nothing(mt: Sequence[str]) -> list[list[dict]]:
    """The baseline that marks no error."""
    return [[] for _ in mt]


def mark_every_word(mt: Sequence[str], severity: str = "minor") -> list[list[dict]]:
    """The baseline that marks every word at ``severity``: each run of non-space characters is a span, so
    the spaces between words (inside an annotated span too) are never marked and its recall is below 1."""
    import re

    return [[{"start": m.start(), "end": m.end(), "severity": severity} for m in re.finditer(r"\S+", t)] for t in mt]


def mark_every_character(mt: Sequence[str], severity: str = "minor") -> list[list[dict]]:
    """The baseline that marks the whole text at ``severity``, spaces included: recall 1 but for omissions
    at the text's end (WMT23's variant counts that position)."""
    return [[{"start": 0, "end": len(t), "severity": severity}] if t else [] for t in mt]
