"""Anchors (as BLEURT-20 added): the unchanged sentence, and an unrelated one."""

from __future__ import annotations

import random
from typing import Sequence

from data_gen.perturbations.base import Perturbation, register


@register
class Identity(Perturbation):
    """The reference itself. Severity 0: a perfect candidate."""

    name = "identity"
    severity = 0.0

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        return sentence


@register
class Unrelated(Perturbation):
    """Another sentence from the corpus. Severity 1: nothing of the meaning is there.

    ``pool`` is the corpus to draw from; the pipeline sets it.
    """

    name = "unrelated"
    severity = 1.0

    def __init__(self, pool: Sequence[str] = ()):
        self.pool = list(pool)

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        if len(self.pool) < 2:
            return None
        for _ in range(8):
            other = self.pool[rng.randrange(len(self.pool))]
            if other != sentence:
                return other
        return None
