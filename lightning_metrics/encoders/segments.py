"""The unified family's input: the mt joined with its other segments in one sequence, as the tokenizer
joins a pair (BERT ``[CLS] mt [SEP] src [SEP]``, XLM-R ``<s> mt </s></s> src </s>``; a third segment is
joined to the first two the same way, as COMET joins them), with token types 0 up to the mt's closing
separator and 1 after it (BERT-style encoders), and the mt tokens' character offsets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from lightning_metrics.errors import LightningMetricsError


@dataclass
class SegmentInputs:
    """Token ids and token types per row; for the mt's tokens (from position 1) their character offsets
    as the tokenizer gives them (``raw_offsets``) and without leading whitespace (``mt_offsets``)."""

    ids: list[list[int]]
    types: list[list[int]]
    mt_offsets: list[list[tuple[int, int]]]
    raw_offsets: list[list[tuple[int, int]]]
    truncated: int  # rows that were cut to max_length


TRUNCATIONS = ("longest", "comet")


def encode_segments(
    tokenizer, segments: Sequence[Sequence[str]], max_length: int, truncation: str = "longest"
) -> SegmentInputs:
    """``segments[0]`` (the mt) and the other segments of each row in one sequence. ``longest``: a row
    longer than ``max_length`` loses one token at a time from the end of its longest segment (the first on
    a tie). ``comet``: as unbabel-comet cuts, for ``max_length`` its import records (the encoder's positions
    minus 4): each segment to ``max_length - 2`` tokens, then the joined row to ``max_length + 2``. Needs a
    fast tokenizer (character offsets)."""
    if truncation not in TRUNCATIONS:
        raise LightningMetricsError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    if not getattr(tokenizer, "is_fast", False):
        raise LightningMetricsError("the unified family needs a fast tokenizer: it maps mt tokens to characters")
    mt = tokenizer(list(segments[0]), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    others = [tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"] for texts in segments[1:]]
    template = pair_template(tokenizer)
    budget = max_length - len(join(template, [[] for _ in segments]))
    out = SegmentInputs([], [], [], [], 0)
    for i, mt_ids in enumerate(mt["input_ids"]):
        parts = [list(mt_ids), *[list(o[i]) for o in others]]
        if truncation == "comet":
            sizes = [min(len(p), max_length - len(template[0]) - len(template[2])) for p in parts]
            row = join(template, [p[:n] for p, n in zip(parts, sizes)])
            out.truncated += sizes != [len(p) for p in parts] or len(row) > max_length + 2
            row = row[: max_length + 2]
        else:
            sizes = cut_to(budget, [len(p) for p in parts])
            out.truncated += sizes != [len(p) for p in parts]
            row = join(template, [p[:n] for p, n in zip(parts, sizes)])
        out.ids.append(row)
        first = len(template[0]) + sizes[0] + 1  # the prefix, the mt and its first closing token: type 0
        out.types.append([0] * first + [1] * (len(row) - first))
        raw = [(int(a), int(b)) for a, b in mt["offset_mapping"][i][: sizes[0]]]
        out.raw_offsets.append(raw)
        out.mt_offsets.append([without_spaces(segments[0][i], a, b) for a, b in raw])
    return out


def pair_template(tokenizer) -> tuple[list[int], list[int], list[int]]:
    """The special tokens the tokenizer puts before, between and after the two texts of a pair (BERT:
    ``[CLS]``, ``[SEP]``, ``[SEP]``; XLM-R: ``<s>``, ``</s></s>``, ``</s>``), read off a pair it encodes."""
    enc = tokenizer("a", "a", verbose=False)
    ids, where = enc["input_ids"], enc.sequence_ids(0)
    first = [k for k, w in enumerate(where) if w == 0]
    second = [k for k, w in enumerate(where) if w == 1]
    if not first or not second:
        raise LightningMetricsError("the tokenizer does not encode pairs: the unified family cannot join segments")
    return ids[: first[0]], ids[first[-1] + 1 : second[0]], ids[second[-1] + 1 :]


def join(template: tuple[list[int], list[int], list[int]], parts: Sequence[list[int]]) -> list[int]:
    """Token lists joined by the pair ``template``: the first two as a pair, then each further part paired
    with everything before it (its inner special tokens kept), as COMET joins three segments."""
    prefix, middle, suffix = template
    if len(parts) < 2:
        raise LightningMetricsError("the unified family joins the mt with at least one other segment")
    ids = prefix + list(parts[0]) + middle + list(parts[1]) + suffix
    for part in parts[2:]:
        ids = prefix + ids[len(prefix) : len(ids) - len(suffix)] + middle + list(part) + suffix
    return ids


def without_spaces(text: str, start: int, end: int) -> tuple[int, int]:
    """A token's character range without the whitespace some tokenizers count in it (``▁word``)."""
    while start < end and text[start].isspace():
        start += 1
    return start, end


def cut_to(budget: int, sizes: list[int]) -> list[int]:
    """Segment lengths within ``budget`` tokens: the longest loses one token at a time."""
    sizes = list(sizes)
    excess = sum(sizes) - max(budget, 0)
    while excess > 0:
        longest = max(range(len(sizes)), key=lambda k: (sizes[k], -k))
        sizes[longest] -= 1
        excess -= 1
    return sizes
