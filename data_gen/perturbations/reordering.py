"""Reordering: swap adjacent words, swap the noun phrases around a verb, move a clause."""

from __future__ import annotations

import random
from functools import lru_cache

from data_gen.perturbations.base import DETERMINERS, STOPWORDS, Perturbation, finish, is_word, register, tokenize
from data_gen.wordnet import load_wordnet

PHRASE_END = frozenset(
    "in on at to from by with about into over under for of and or but because while that which who".split()
)


@lru_cache(maxsize=None)
def _has_verb_sense(word: str) -> bool:
    return bool(load_wordnet().synsets(word, "v"))


@register
class AdjacentSwap(Perturbation):
    """Swap two neighbouring words. Severity 0.3: fluency suffers more than meaning."""

    name = "adjacent_swap"
    severity = 0.3

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        tokens = tokenize(sentence)
        pairs = [
            i
            for i in range(len(tokens) - 1)
            if is_word(tokens[i]) and is_word(tokens[i + 1]) and tokens[i].lower() != tokens[i + 1].lower()
        ]
        if not pairs:
            return None
        i = rng.choice(pairs)
        tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        return finish(tokens, sentence)


@register
class NounPhraseSwap(Perturbation):
    """Swap the noun phrases around a verb: "the dog bit the man" -> "the man bit the dog".

    A noun phrase is a determiner and up to three more words; the verb is the single word
    between the two phrases and must have a WordNet verb sense. Severity 0.7: who did what to
    whom is reversed.
    """

    name = "np_swap"
    severity = 0.7

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        tokens = tokenize(sentence)
        dets = [i for i, t in enumerate(tokens) if t.lower() in DETERMINERS]
        options = []
        for a in dets:
            for b in dets:
                verb = b - 1
                if not 2 <= b - a <= 5 or not all(is_word(t) for t in tokens[a:b]):
                    continue
                if tokens[verb].lower() in STOPWORDS or not _has_verb_sense(tokens[verb].lower()):
                    continue
                end = b + 1
                while (
                    end < len(tokens)
                    and end - b < 4
                    and is_word(tokens[end])
                    and tokens[end].lower() not in PHRASE_END | DETERMINERS
                ):
                    end += 1
                options.append((a, verb, b, end))
        if not options:
            return None
        a, verb, b, end = rng.choice(options)
        swapped = tokens[:a] + tokens[b:end] + [tokens[verb]] + tokens[a:verb] + tokens[end:]
        return finish(swapped, sentence)


@register
class ClauseMove(Perturbation):
    """Move the clause after a comma to the front: "When it rains, we stay in." -> "We stay in, when it rains."

    Both sides need at least three words. Severity 0.2: the meaning mostly survives.
    """

    name = "clause_move"
    severity = 0.2

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        tokens = tokenize(sentence)
        end = [] if not tokens or tokens[-1] not in ".!?" else [tokens[-1]]
        body = tokens[: len(tokens) - len(end)]
        commas = [
            i
            for i, t in enumerate(body)
            if t == "," and sum(map(is_word, body[:i])) >= 3 and sum(map(is_word, body[i + 1 :])) >= 3
        ]
        if not commas:
            return None
        i = rng.choice(commas)
        return finish(body[i + 1 :] + [","] + body[:i] + end, sentence)
