"""Error spans, the shapes every layer shares: the severities (in rising order), the token tags' ids
(0 OK, then 1 + the severity's index; :data:`IGNORED_TOKEN` where a token loss looks away), and the
per-character severity levels of a text's spans. A span is ``{start, end, severity[, confidence]}``,
character offsets into the mt, end exclusive."""

from __future__ import annotations

import unicodedata
from typing import Iterator, Sequence

import numpy as np

SEVERITIES = ("minor", "major", "critical")
SEVERITY_WEIGHTS = {"minor": 1.0, "major": 5.0, "critical": 10.0}  # MQM's weights (XCOMET's span penalty too)
IGNORED_TOKEN = -100  # the tag of positions a token loss skips (special tokens, src, ref, padding)


def character_levels(spans: Sequence[dict], length: int) -> np.ndarray:
    """Per character of a text of ``length``: 0 (no error) or 1 + the index of its severity in
    :data:`SEVERITIES`; where spans overlap, the highest severity."""
    levels = np.zeros(length, dtype=np.int8)
    for span in spans:
        start, end = max(0, int(span["start"])), min(length, int(span["end"]))
        if end > start:
            rank = SEVERITIES.index(span["severity"]) + 1
            levels[start:end] = np.maximum(levels[start:end], rank)
    return levels


def runs(values: Sequence) -> Iterator[tuple[int, int, object]]:
    """``(start, end, value)`` for each run of equal consecutive ``values`` (end exclusive)."""
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            yield start, i, values[start]
            start = i


def _in_word(char: str) -> bool:
    """A letter, digit or mark of a script that separates words (not a CJK ideograph or kana, each of
    which is a word of its own)."""
    if not (char.isalnum() or unicodedata.category(char).startswith("M")):
        return False
    return not ("\u2e80" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff" or "\U00020000" <= char <= "\U0003ffff")


def word_spans(spans: Sequence[dict], text: str) -> list[dict]:
    """``spans`` on word boundaries, for a person to read and for span F1: each span is extended to the
    whole words it touches (``Orchide|en`` becomes ``Orchideen``), a character covered twice keeps the
    higher severity, and neighbours of one severity separated by whitespace alone become one span. A
    span's confidence is the mean over its characters of the confidence of the span that gave each."""
    levels = np.zeros(len(text), dtype=np.int8)
    confidence = np.full(len(text), np.nan)
    for span in sorted(spans, key=lambda s: SEVERITIES.index(s["severity"])):  # higher severities win
        start, end = max(0, int(span["start"])), min(len(text), int(span["end"]))
        if end <= start:
            continue
        while start > 0 and _in_word(text[start - 1]) and _in_word(text[start]):
            start -= 1
        while end < len(text) and _in_word(text[end - 1]) and _in_word(text[end]):
            end += 1
        levels[start:end] = SEVERITIES.index(span["severity"]) + 1
        confidence[start:end] = span.get("confidence", np.nan)
    for i, j, level in list(runs(levels.tolist())):  # whitespace between two runs of one severity joins them
        if not level and 0 < i and j < len(text) and not text[i:j].strip() and levels[i - 1] == levels[j]:
            levels[i:j] = levels[i - 1]
    out = []
    for i, j, level in runs(levels.tolist()):
        if level:
            span = {"start": i, "end": j, "severity": SEVERITIES[level - 1]}
            values = confidence[i:j][~np.isnan(confidence[i:j])]
            if values.size:
                span["confidence"] = float(values.mean())
            out.append(span)
    return out
