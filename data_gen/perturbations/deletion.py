"""Deletion: drop words, or a contiguous span of words."""

from __future__ import annotations

import random

from data_gen.perturbations.base import Perturbation, finish, is_content_word, is_word, register, tokenize


@register
class WordDeletion(Perturbation):
    """Drop 1..``max_words`` words; content words are ``content_weight`` times likelier to go.

    Severity 0.4: the meaning is usually damaged but partly recoverable.
    """

    name = "deletion"
    severity = 0.4

    def __init__(self, max_words: int = 3, content_weight: float = 3.0):
        self.max_words, self.content_weight = max_words, content_weight

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        tokens = tokenize(sentence)
        positions = [i for i, t in enumerate(tokens) if is_word(t)]
        if len(positions) < 3:
            return None
        k = rng.randint(1, min(self.max_words, len(positions) - 2))
        weights = [self.content_weight if is_content_word(tokens[i]) else 1.0 for i in positions]
        dropped: set[int] = set()
        while len(dropped) < k:
            dropped.add(rng.choices(positions, weights=weights)[0])
        return finish([t for i, t in enumerate(tokens) if i not in dropped], sentence)


@register
class SpanDeletion(Perturbation):
    """Drop one contiguous span of 2..``max_span`` words (never all but one word).

    Severity 0.5: a whole phrase is gone.
    """

    name = "span_deletion"
    severity = 0.5

    def __init__(self, max_span: int = 4):
        self.max_span = max_span

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        tokens = tokenize(sentence)
        positions = [i for i, t in enumerate(tokens) if is_word(t)]
        if len(positions) < 4:
            return None
        span = rng.randint(2, min(self.max_span, len(positions) - 2))
        start = rng.randint(0, len(positions) - span)
        dropped = set(range(positions[start], positions[start + span - 1] + 1))
        return finish([t for i, t in enumerate(tokens) if i not in dropped], sentence)
