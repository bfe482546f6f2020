"""Word substitution through WordNet: synonyms (meaning kept) and antonyms (meaning reversed)."""

from __future__ import annotations

import random
from functools import lru_cache

from data_gen.perturbations.base import Perturbation, finish, is_content_word, match_case, register, tokenize
from data_gen.wordnet import load_wordnet

VERB_CONTEXT = frozenset("can could will would shall should must may might to i you we they he she".split())


@lru_cache(maxsize=None)
def dominant_pos(word: str) -> tuple[str, str] | None:
    """``(pos, base form)`` of the part of speech whose senses of ``word`` are tagged most often
    in WordNet's sense counts (ties: noun, verb, adjective, adverb); None when WordNet lacks it."""
    wn = load_wordnet()
    best, best_count = None, -1
    for pos in ("n", "v", "a", "r"):
        base = wn.morphy(word, pos)
        if base is None:
            continue
        count = sum(
            lemma.count()
            for synset in wn.synsets(base, pos)
            for lemma in synset.lemmas()
            if lemma.name().lower() == base
        )
        if count > best_count:
            best, best_count = (pos, base), count
    return best


def main_pos(word: str) -> str | None:
    """The dominant part of speech of ``word`` when ``word`` is its own base form (no re-inflection)."""
    found = dominant_pos(word)
    return found[0] if found and found[1] == word else None


@lru_cache(maxsize=None)
def _synonyms(word: str, pos: str) -> tuple[str, ...]:
    """Single-word lemmas of the most frequent sense, sorted (deterministic choices)."""
    lemmas = load_wordnet().synsets(word, pos)[0].lemmas()
    return tuple(sorted({lemma.name() for lemma in lemmas if _single(lemma.name()) and lemma.name().lower() != word}))


@lru_cache(maxsize=None)
def _antonyms(word: str) -> tuple[str, ...]:
    """Single-word antonyms of ``word`` as an adjective, adverb or verb in its base form."""
    wn = load_wordnet()
    return tuple(
        sorted(
            {
                antonym.name()
                for pos in ("a", "r", "v")
                if wn.morphy(word, pos) == word
                for synset in wn.synsets(word, pos)
                for lemma in synset.lemmas()
                if lemma.name().lower() == word
                for antonym in lemma.antonyms()
                if _single(antonym.name())
            }
        )
    )


def _single(name: str) -> bool:
    return "_" not in name and name.isalpha()


@register
class Synonym(Perturbation):
    """Replace one content word with a synonym from its most frequent WordNet sense.

    Severity 0.15: the meaning is (nearly) kept.
    """

    name = "synonym"
    severity = 0.15

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        load_wordnet()  # WordNetNotFound before any work, not on the first content word
        tokens = tokenize(sentence)
        candidates = [i for i, t in enumerate(tokens) if is_content_word(t)]
        rng.shuffle(candidates)
        for i in candidates:
            word = tokens[i].lower()
            pos = main_pos(word)
            if pos is None:
                continue
            if pos == "n" and i > 0 and tokens[i - 1].lower() in VERB_CONTEXT:
                continue  # "can swim": a verb here, though WordNet's first sense is a noun
            options = _synonyms(word, pos)
            if options:
                tokens[i] = match_case(rng.choice(options).lower(), tokens[i])
                return finish(tokens, sentence)
        return None


@register
class Antonym(Perturbation):
    """Replace an adjective, adverb or verb with a WordNet antonym ("hot" -> "cold").

    Severity 0.8: the meaning is reversed.
    """

    name = "antonym"
    severity = 0.8

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        tokens = tokenize(sentence)
        candidates = [i for i, t in enumerate(tokens) if t.isalpha() and len(t) > 1]
        rng.shuffle(candidates)
        for i in candidates:
            word = tokens[i].lower()
            options = _antonyms(word)
            if options:
                tokens[i] = match_case(rng.choice(options).lower(), tokens[i])
                return finish(tokens, sentence)
        return None
