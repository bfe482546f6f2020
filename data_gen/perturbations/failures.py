"""Failure modes of MT systems that human ratings seldom show (MetricX-24 mixes such cases into its
training data): output that stops early, output that repeats itself, character noise, and output
without its punctuation. (Fluent but unrelated output is :class:`~data_gen.perturbations.anchors.Unrelated`.)
They work on any script: words are whitespace runs where a sentence has spaces, characters where it
has none (Chinese, Japanese)."""

from __future__ import annotations

import random
import re
import unicodedata

from data_gen.perturbations.base import Perturbation, register


def _units(sentence: str) -> tuple[list[str], str]:
    """The sentence as words (joined by spaces) or, without spaces, as characters (joined by nothing)."""
    words = sentence.split()
    return (words, " ") if len(words) > 1 else (list(sentence), "")


@register
class Undertranslation(Perturbation):
    """Only the first 30-60% of the sentence (a system that stopped early). Severity 0.8."""

    name = "undertranslation"
    severity = 0.8

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        units, joiner = _units(sentence.strip())
        if len(units) < 4:
            return None
        keep = max(1, int(len(units) * rng.uniform(0.3, 0.6)))
        return joiner.join(units[:keep])


@register
class Duplication(Perturbation):
    """The sentence followed by a repeat of all or its second half (a system that loops). Severity 0.8."""

    name = "duplication"
    severity = 0.8

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        units, joiner = _units(sentence.strip())
        if len(units) < 2:
            return None
        start = 0 if rng.random() < 0.5 else len(units) // 2
        return joiner.join(units + units[start:])


@register
class Gibberish(Perturbation):
    """Random characters of the sentence's own alphabet, in words of its length. Severity 1."""

    name = "gibberish"
    severity = 1.0

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        letters = [c for c in sentence if c.isalpha()]
        if len(set(letters)) < 3:
            return None
        units, joiner = _units(sentence.strip())
        return joiner.join("".join(rng.choice(letters) for _ in range(max(1, len(u)))) for u in units)


@register
class MissingPunctuation(Perturbation):
    """Every punctuation mark removed (a system that drops them). Severity 0.2."""

    name = "missing_punctuation"
    severity = 0.2

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        text = "".join(c for c in sentence if not unicodedata.category(c).startswith("P"))
        text = re.sub(r"\s+", " ", text).strip()
        return text if text and text != sentence.strip() else None
