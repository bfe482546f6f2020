"""What every perturbation shares: the class contract, the registry, and word-level text helpers."""

from __future__ import annotations

import random
import re
from typing import ClassVar

TOKEN_RE = re.compile(r"\d+(?:[.,:]\d+)+|\w+(?:['’-]\w+)*|[^\w\s]")
NO_SPACE_BEFORE = set(".,!?;:)]}%…") | {"'s", "n't"}
NO_SPACE_AFTER = set("([{$")

# Function words (hand-written): deletion prefers the other words, substitutions skip these.
STOPWORDS = frozenset(
    """a an the this that these those my your his her its our their some any no every each all both either neither
    i me you he him she it we us they them myself yourself himself herself itself ourselves themselves who whom whose
    which what where when why how there here and or but nor so yet for of in on at to from by with about as into onto
    upon over under than then if because while although though until unless since after before during through
    is am are was were be been being do does did done have has had having will would shall should can could may might
    must not n't never also just very too only even more most much many few less least own same such""".split()
)
DETERMINERS = frozenset("a an the this that these those my your his her its our their".split())


class Perturbation:
    """A named edit of a sentence with a documented severity in [0, 1].

    ``apply(sentence, rng)`` returns the edited text, or None when the edit does not apply
    (then the pipeline tries another). ``rng`` is a ``random.Random``: the same seed gives the
    same edit.
    """

    name: ClassVar[str]
    severity: ClassVar[float]

    def apply(self, sentence: str, rng: random.Random) -> str | None:
        raise NotImplementedError


REGISTRY: dict[str, type[Perturbation]] = {}


def register(cls: type[Perturbation]) -> type[Perturbation]:
    """Class decorator: make a perturbation available by its ``name`` (recipes use the names)."""
    if not 0.0 <= cls.severity <= 1.0:
        raise ValueError(f"{cls.__name__}.severity must be in [0, 1]")
    REGISTRY[cls.name] = cls
    return cls


def tokenize(sentence: str) -> list[str]:
    """Words (with inner apostrophes and hyphens) and punctuation marks."""
    return TOKEN_RE.findall(sentence)


def detokenize(tokens: list[str]) -> str:
    """Join tokens with single spaces, except before closing and after opening punctuation."""
    out = ""
    for i, tok in enumerate(tokens):
        if i and tok not in NO_SPACE_BEFORE and tokens[i - 1] not in NO_SPACE_AFTER:
            out += " "
        out += tok
    return out


def is_word(token: str) -> bool:
    return token[:1].isalnum()


def is_content_word(token: str) -> bool:
    return token.isalpha() and len(token) > 2 and token.lower() not in STOPWORDS


def match_case(new: str, old: str) -> str:
    """Give ``new`` the capitalisation pattern of ``old`` (UPPER, Capitalised or lower)."""
    if len(old) > 1 and old.isupper():
        return new.upper()
    if old[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def finish(tokens: list[str], original: str) -> str | None:
    """Detokenize an edited sentence and fix its capitalisation.

    The first word is capitalised when the original's was; a word that used to start the
    sentence and now stands elsewhere is lower-cased when it is a common word. Returns None
    when nothing is left or the text did not change.
    """
    words = [t for t in tokens if is_word(t)]
    if not words:
        return None
    original_tokens = tokenize(original)
    first_original = next((t for t in original_tokens if is_word(t)), "")
    tokens = list(tokens)
    first_index = next(i for i, t in enumerate(tokens) if is_word(t))
    for i, tok in enumerate(tokens):
        if (
            i != first_index
            and tok == first_original
            and tok[:1].isupper()
            and tok.lower() in STOPWORDS | _COMMON
            and tok != "I"
        ):
            tokens[i] = tok.lower()
    if first_original[:1].isupper():
        tokens[first_index] = tokens[first_index][:1].upper() + tokens[first_index][1:]
    text = detokenize(tokens)
    return None if text == original or text == detokenize(original_tokens) else text


# common words that may start a sentence but are not names (lower-cased when moved)
_COMMON = frozenset("yesterday today tomorrow now then later soon often sometimes usually".split())
