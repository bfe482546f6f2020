"""Tokenised sequences as encoders take them: pairs cut as BERT and BLEURT cut them, the distinct
sentences of a table tokenised once and grouped by length, and dynamic padding. Training
collates, scoring and BERTScore all build their encoder inputs here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from lightning_metrics.encoders.inference import length_batches
from lightning_metrics.errors import LightningMetricsError

INPUT_FORMATS = ("cross", "sentences", "segments")  # a pair per row, each unique sentence alone, or mt + others


@dataclass(frozen=True)
class BatchLayout:
    """What a model reads and a data module must make: ``cross`` batches (one sequence per row, a
    pair in one sequence) or ``sentences`` batches (each unique sentence encoded alone), over the
    table's ``text_fields``. A model gives its own (``model.batch_layout``); ``fit`` links it into the
    data module."""

    input_format: str = "cross"
    text_fields: Sequence[str] = ("mt", "ref")

    def __post_init__(self):
        object.__setattr__(self, "text_fields", tuple(self.text_fields))
        if self.input_format not in INPUT_FORMATS:
            raise LightningMetricsError(
                f"data.layout.input_format must be one of {INPUT_FORMATS}, got {self.input_format!r}"
            )


def encode_pairs(
    tokenizer, firsts: list[str], seconds: list[str], max_length: int
) -> tuple[list[list[int]], list[list[int]] | None]:
    """Token ids (and token types, where the tokenizer gives them) of each ``first, second`` pair, cut
    to ``max_length`` as BERT and BLEURT cut a pair: one token at a time from the end of the longer
    side, the second on a tie. (A fast tokenizer's own ``longest_first`` keeps that token on the longer
    side instead, so a cut pair would differ by one token from BLEURT's.)"""
    enc = tokenizer(firsts, seconds, verbose=False)
    types = enc.get("token_type_ids")
    if getattr(enc, "encodings", None) is None:  # a tokenizer without sequence ids: its own cut
        enc = tokenizer(firsts, seconds, truncation="longest_first", max_length=max_length)
        return enc["input_ids"], enc.get("token_type_ids")
    out_ids, out_types = [], None if types is None else []
    for i, ids in enumerate(enc["input_ids"]):
        keep = _kept_positions(enc.sequence_ids(i), max_length)
        out_ids.append(ids if keep is None else [ids[p] for p in keep])
        if out_types is not None:
            out_types.append(types[i] if keep is None else [types[i][p] for p in keep])
    return out_ids, out_types


def _kept_positions(sequence_ids: list, max_length: int) -> list[int] | None:
    """Positions a pair keeps under BERT's cut (None: all of them); special tokens always stay."""
    excess = len(sequence_ids) - max_length
    if excess <= 0:
        return None
    sides = [sequence_ids.count(0), sequence_ids.count(1)]
    excess = min(excess, sum(sides))  # a max_length below the special tokens keeps those alone
    cut_to_even = min(excess, abs(sides[0] - sides[1]))  # the longer side alone, down to the shorter's length
    sides[0 if sides[0] > sides[1] else 1] -= cut_to_even
    rest = excess - cut_to_even
    sides[0] -= rest // 2
    sides[1] -= rest - rest // 2  # the second loses the odd token
    seen, keep = [0, 0], []
    for position, side in enumerate(sequence_ids):
        if side is None:
            keep.append(position)
        else:
            seen[side] += 1
            if seen[side] <= sides[side]:
                keep.append(position)
    return keep


@dataclass
class SegmentInputs:
    """Rows as ``[CLS] mt [SEP] second [SEP] (third [SEP])``: token ids per row, and for the mt's tokens
    (which start at position 1) their character offsets into the mt, leading whitespace left out."""

    ids: list[list[int]]
    mt_offsets: list[list[tuple[int, int]]]
    truncated: int  # rows that were cut to max_length


def encode_segments(tokenizer, segments: Sequence[Sequence[str]], max_length: int) -> SegmentInputs:
    """The mt (``segments[0]``) and the other segments of each row in one sequence (the unified family's
    input). A row longer than ``max_length`` loses one token at a time from the end of its longest
    segment (the first on a tie). Needs a fast tokenizer (character offsets)."""
    if not getattr(tokenizer, "is_fast", False):
        raise LightningMetricsError("the unified family needs a fast tokenizer: it maps mt tokens to characters")
    mt = tokenizer(list(segments[0]), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    others = [tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"] for texts in segments[1:]]
    cls, sep = _special_ids(tokenizer)
    ids, offsets, truncated = [], [], 0
    budget = max_length - len(segments) - 1
    for i, mt_ids in enumerate(mt["input_ids"]):
        parts = [list(mt_ids), *[list(o[i]) for o in others]]
        sizes = _cut_to(budget, [len(p) for p in parts])
        truncated += sizes != [len(p) for p in parts]
        row = [cls]
        for part, size in zip(parts, sizes):
            row += part[:size] + [sep]
        ids.append(row)
        text = segments[0][i]
        offsets.append([_without_spaces(text, a, b) for a, b in mt["offset_mapping"][i][: sizes[0]]])
    return SegmentInputs(ids, offsets, truncated)


def _without_spaces(text: str, start: int, end: int) -> tuple[int, int]:
    """A token's character range without the whitespace some tokenizers count in it (``▁word``)."""
    while start < end and text[start].isspace():
        start += 1
    return start, end


def _special_ids(tokenizer) -> tuple[int, int]:
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if cls is None or sep is None:
        raise LightningMetricsError("the tokenizer has no CLS/SEP (or BOS/EOS) tokens to join segments with")
    return int(cls), int(sep)


def _cut_to(budget: int, sizes: list[int]) -> list[int]:
    """Segment lengths within ``budget`` tokens: the longest loses one token at a time."""
    sizes = list(sizes)
    excess = sum(sizes) - max(budget, 0)
    while excess > 0:
        longest = max(range(len(sizes)), key=lambda k: (sizes[k], -k))
        sizes[longest] -= 1
        excess -= 1
    return sizes


def unique_sentence_groups(
    tokenizer, max_length: int, columns: dict[str, list[str]], group_size: int, group_tokens: int | None = None
) -> tuple[list[dict], dict]:
    """The distinct sentences of ``columns``, tokenised once, sorted by token count and padded in
    groups of at most ``group_size`` sentences and ``group_tokens`` padded tokens; and per field,
    each row's index into the concatenated groups."""
    unique: dict[str, int] = {}
    positions = {f: [unique.setdefault(t, len(unique)) for t in texts] for f, texts in columns.items()}
    ids = tokenizer(list(unique), truncation=True, max_length=max_length)["input_ids"]
    # token counts, not characters: scripts differ in characters per token
    batches = length_batches([len(x) for x in ids], group_size, group_tokens)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.concatenate(batches) if batches else []] = np.arange(len(ids))
    groups = [pad_sequences(tokenizer, [ids[i] for i in batch]) for batch in batches]
    return groups, {f: torch.from_numpy(rank[p]) for f, p in positions.items()}


def pad_sequences(tokenizer, sequences: list[list[int]], token_types: list[list[int]] | None = None) -> dict:
    """Pad token-id lists into ``input_ids``/``attention_mask``, and ``token_type_ids`` when the
    model takes them (``token_types`` per sequence, else zeros). Filled in one numpy step, not per row."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    width = int(lengths.max())
    columns = np.arange(width)[None, :]
    left = getattr(tokenizer, "padding_side", "right") == "left"
    mask = columns >= width - lengths[:, None] if left else columns < lengths[:, None]
    input_ids = np.full((len(sequences), width), int(tokenizer.pad_token_id or 0), dtype=np.int64)
    input_ids[mask] = np.concatenate(sequences)  # row-major: each row's span, in order
    out = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask.astype(np.int64))}
    if "token_type_ids" in getattr(tokenizer, "model_input_names", []):
        types = np.zeros_like(input_ids)
        if token_types:
            types[mask] = np.concatenate(token_types)
        out["token_type_ids"] = torch.from_numpy(types)
    return out
