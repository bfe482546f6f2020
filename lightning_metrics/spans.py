"""Error spans, the shapes every layer shares: the severities (in rising order), the token tags' ids
(0 OK, then 1 + the severity's index; :data:`IGNORED_TOKEN` where a token loss looks away), and the
per-character severity levels of a text's spans. A span is ``{start, end, severity[, confidence]}``,
character offsets into the mt, end exclusive."""

from __future__ import annotations

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
