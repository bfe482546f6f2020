"""The BERTScore-alignment baseline for error spans: an mt token whose best match among the other
text's tokens (the reference, or the source where there is none, through a multilingual encoder) is
less similar than a threshold is marked; consecutive marked tokens make one span, at one severity.
The threshold and the severity are chosen on a dev split (:func:`choose_threshold`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lightning_metrics.encoders.segments import without_spaces
from lightning_metrics.evaluation.spans import span_counts, span_scores


@dataclass
class TokenMatches:
    """Per mt row: its tokens' character offsets and each token's best cosine similarity to the other text."""

    offsets: list[list[tuple[int, int]]]
    best: list[np.ndarray]


def token_matches(scorer, mt: Sequence[str], other: Sequence[str]) -> TokenMatches:
    """Each mt token's greatest cosine similarity to any token of its row's ``other`` text, by ``scorer``
    (a :class:`~lightning_metrics.baselines.bertscore.BERTScorer`: its encoder, layer and tokenisation)."""
    unique = list(dict.fromkeys([*mt, *other]))
    ids, vectors = scorer.token_embeddings(unique)
    at = {s: i for i, s in enumerate(unique)}
    enc = scorer.tokenizer(
        [s.strip() for s in mt], return_offsets_mapping=True, truncation=True, max_length=scorer.max_length
    )
    offsets, best = [], []
    for row, (m, o) in enumerate(zip(mt, other)):
        keep = [k for k, t in enumerate(ids[at[m]]) if t not in scorer.special_ids]
        theirs = [k for k, t in enumerate(ids[at[o]]) if t not in scorer.special_ids]
        sim = vectors[at[m]][keep] @ vectors[at[o]][theirs].T
        shift = len(m) - len(m.lstrip())  # the tokenizer read the text stripped
        ranges = [enc["offset_mapping"][row][k] for k in keep]
        offsets.append([without_spaces(m, int(a) + shift, int(b) + shift) for a, b in ranges])
        best.append(sim.max(dim=1).values.numpy() if sim.numel() else np.ones(len(keep)))
    return TokenMatches(offsets, best)


def alignment_spans(matches: TokenMatches, threshold: float, severity: str = "minor") -> list[list[dict]]:
    """Spans of consecutive mt tokens whose best match is below ``threshold``."""
    out = []
    for offsets, best in zip(matches.offsets, matches.best):
        spans, open_span = [], None
        for (a, b), value in zip(offsets, best):
            if value < threshold and b > a:
                if open_span is None:
                    open_span = {"start": a, "end": b, "severity": severity}
                    spans.append(open_span)
                else:
                    open_span["end"] = b
            else:
                open_span = None
        out.append(spans)
    return out


def choose_threshold(
    matches: TokenMatches, annotated: Sequence[Sequence[dict]], mt: Sequence[str], grid: Sequence[float]
) -> tuple[float, str, float]:
    """The threshold and severity (minor or major) of the best span F1 (severity ignored, then matched,
    on ties) on these rows, and that F1: run it on a dev split only."""
    best = (-1.0, -1.0)
    choice = (grid[0], "minor")
    for threshold in grid:
        for severity in ("minor", "major"):
            counts = span_counts(alignment_spans(matches, threshold, severity), annotated, mt)
            values = span_scores(counts, resamples=1).values
            key = (values["severity ignored"]["f1"], values["severity must match"]["f1"])
            if key > best:
                best, choice = key, (float(threshold), severity)
    return choice[0], choice[1], best[0]
