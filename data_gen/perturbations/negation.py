"""Negation: insert a negation grammatically, or remove one that is there.

Insertion: after the first auxiliary or copula ("is" -> "is not", "can" -> "cannot"), else
do-support on the first main verb ("went" -> "did not go", "sits" -> "does not sit",
"they go" -> "they do not go"). Removal: "is not" -> "is", "cannot" -> "can", "did not go" ->
"went", "doesn't sit" -> "sits". Irregular forms come from WordNet's verb exception list.
"""

from __future__ import annotations

import random
from functools import lru_cache

from data_gen.perturbations.base import Perturbation, finish, match_case, register, tokenize
from data_gen.perturbations.substitution import dominant_pos
from data_gen.wordnet import load_wordnet

AUXILIARIES = frozenset("is are was were am will would could should must may might shall".split())
PERFECT = frozenset("has have had".split())
DO = {"do": "base", "does": "3sg", "did": "past"}
CONTRACTIONS = {"can't": "can", "cannot": "can", "won't": "will", "shan't": "shall", "ain't": "is"}
PLURAL_SUBJECTS = frozenset("i you we they".split())
SINGULAR_SUBJECTS = frozenset("he she it".split())


@lru_cache(maxsize=1)
def _irregular() -> tuple[dict[str, str], dict[str, str]]:
    """(inflected -> base, base -> simple past) from WordNet's verb.exc.

    verb.exc lists past tenses and participles alike; the simple past is taken as the form
    not ending in -n/-ne/-ing/-s when there is one ("went" over "gone"), else the first
    alphabetically ("began" over "begun")."""
    to_base: dict[str, str] = {}
    forms: dict[str, list[str]] = {}
    with load_wordnet().open("verb.exc") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].isalpha() and parts[1].isalpha() and parts[0] != parts[1]:
                to_base.setdefault(parts[0], parts[1])
                if not parts[0].endswith(("ing", "s")):
                    forms.setdefault(parts[1], []).append(parts[0])
    past = {}
    for base, candidates in forms.items():
        simple = sorted(c for c in candidates if not c.endswith(("n", "ne")))
        past[base] = (simple or sorted(candidates))[0]
    return to_base, past


def _verb_base(word: str) -> str | None:
    """The base form when ``word`` is mostly used as a verb (WordNet sense counts)."""
    found = dominant_pos(word)
    if found is None or found[0] != "v":
        return None
    return _irregular()[0].get(word) or found[1]


def _inflect(base: str, form: str) -> str:
    if form == "base":
        return base
    if form == "past":
        irregular = _irregular()[1].get(base)
        if irregular:
            return irregular
        return base + "d" if base.endswith("e") else base + "ed"
    if base.endswith(("s", "sh", "ch", "x", "z", "o")):
        return base + "es"
    if base.endswith("y") and base[-2:-1] not in "aeiou":
        return base[:-1] + "ies"
    return base + "s"


@register
class Negation(Perturbation):
    """Insert or remove a negation (removal first when the sentence has one). Severity 0.9."""

    name = "negation"
    severity = 0.9

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        tokens = tokenize(sentence)
        if sentence.rstrip().endswith("?"):
            return None
        edited = _remove(tokens) or _insert(tokens)
        return None if edited is None else finish(edited, sentence)


def _remove(tokens: list[str]) -> list[str] | None:
    for i, tok in enumerate(tokens):
        low = tok.lower()
        if low in CONTRACTIONS:
            return tokens[:i] + [match_case(CONTRACTIONS[low], tok)] + tokens[i + 1 :]
        if low.endswith("n't") and low[:-3] in DO and i + 1 < len(tokens):
            return _undo_do(tokens, i, low[:-3], i + 1)
        if low.endswith("n't") and low[:-3] in AUXILIARIES | PERFECT:
            return tokens[:i] + [match_case(low[:-3], tok)] + tokens[i + 1 :]
        if low == "not" and i > 0:
            prev = tokens[i - 1].lower()
            if prev in DO and i + 1 < len(tokens):
                return _undo_do(tokens, i - 1, prev, i + 1)
            if prev in AUXILIARIES | PERFECT:
                return tokens[:i] + tokens[i + 1 :]
    return None


def _undo_do(tokens: list[str], do_at: int, do: str, verb_at: int) -> list[str] | None:
    verb = tokens[verb_at]
    if not verb.isalpha():
        return None
    inflected = match_case(_inflect(verb.lower(), DO[do]), tokens[do_at])
    return tokens[:do_at] + [inflected] + tokens[verb_at + 1 :]


def _insert(tokens: list[str]) -> list[str] | None:
    for i, tok in enumerate(tokens):
        low = tok.lower()
        nxt = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
        if low == "can":
            return tokens[:i] + [match_case("cannot", tok)] + tokens[i + 1 :]
        if low in AUXILIARIES or low in DO:
            return tokens[: i + 1] + ["not"] + tokens[i + 1 :]
        if low in PERFECT:
            if nxt.endswith(("ed", "en")) or nxt in _irregular()[0]:
                return tokens[: i + 1] + ["not"] + tokens[i + 1 :]
            form = "past" if low == "had" else ("3sg" if low == "has" else "base")
            return (
                tokens[:i]
                + [match_case({"past": "did", "3sg": "does", "base": "do"}[form], tok), "not", "have"]
                + tokens[i + 1 :]
            )
        if i == 0 or not tok.isalpha() or not tok.islower():
            continue
        base = _verb_base(low)
        if base is None and tokens[i - 1].lower() in PLURAL_SUBJECTS | SINGULAR_SUBJECTS:
            base = _irregular()[0].get(low) or load_wordnet().morphy(low, "v")  # a pronoun subject: a verb follows
        if base is None:
            continue
        if low != base and (low in _irregular()[0] or low.endswith("ed")):
            return tokens[:i] + ["did", "not", base] + tokens[i + 1 :]
        if low != base and low.endswith("s"):
            return tokens[:i] + ["does", "not", base] + tokens[i + 1 :]
        if low == base and tokens[i - 1].lower() in PLURAL_SUBJECTS:
            return tokens[:i] + ["do", "not", base] + tokens[i + 1 :]
    return None
