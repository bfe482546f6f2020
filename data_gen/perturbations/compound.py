"""Compound recipes: several perturbations applied in sequence."""

from __future__ import annotations

import random
from typing import Sequence

from data_gen.perturbations.base import Perturbation


def combined_severity(severities: Sequence[float]) -> float:
    """``1 - Π(1 - s_i)``: each step destroys a share of what meaning is left (0 stays 0, 1 stays 1)."""
    kept = 1.0
    for s in severities:
        kept *= 1.0 - s
    return 1.0 - kept


class Compound:
    """Apply ``steps`` in order; a step that does not apply is skipped.

    ``apply`` returns ``(text, applied_names, severity)`` or None when no step applied.
    """

    def __init__(self, steps: Sequence[Perturbation]):
        self.steps = list(steps)

    def apply(self, sentence: str, rng: random.Random) -> tuple[str, list[str], float] | None:
        text, applied, severities = sentence, [], []
        for step in self.steps:
            out = step.apply(text, rng)
            if out is not None:
                text = out
                applied.append(step.name)
                severities.append(step.severity)
        if not applied:
            return None
        return text, applied, combined_severity(severities)
