"""Tokenised sequences as encoders take them: pairs cut as BERT and BLEURT cut them, the distinct
sentences of a table tokenised once and grouped by length, and dynamic padding. Training
collates, scoring and BERTScore all build their encoder inputs here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from lightning_metrics.encoders.inference import length_batches
from lightning_metrics.errors import LightningMetricsError

INPUT_FORMATS = ("cross", "sentences", "segments", "template")  # a pair per row, each unique sentence alone, mt +
# others, or one text from a template over the row (MetricX)


@dataclass(frozen=True)
class BatchLayout:
    """What a model reads and a data module must make: ``cross`` batches (one sequence per row, a
    pair in one sequence) or ``sentences`` batches (each unique sentence encoded alone), over the
    table's ``text_fields``. A model gives its own (``model.batch_layout``); ``fit`` links it into the
    data module."""

    input_format: str = "cross"
    text_fields: Sequence[str] = ("mt", "ref")
    template: Optional[str] = None  # the template format's: "metricx-24:both" (lightning_metrics.encoders.template)

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


def unique_sentence_groups(
    tokenizer, max_length: int, columns: dict[str, list[str]], group_size: int, group_tokens: int | None = None
) -> tuple[list[dict], dict, list[str]]:
    """The distinct sentences of ``columns``, tokenised once, sorted by token count and padded in
    groups of at most ``group_size`` sentences and ``group_tokens`` padded tokens; per field, each
    row's index into the concatenated groups; and the distinct sentences in that order."""
    unique: dict[str, int] = {}
    positions = {f: [unique.setdefault(t, len(unique)) for t in texts] for f, texts in columns.items()}
    ids = tokenizer(list(unique), truncation=True, max_length=max_length)["input_ids"]
    # token counts, not characters: scripts differ in characters per token
    batches = length_batches([len(x) for x in ids], group_size, group_tokens)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.concatenate(batches) if batches else []] = np.arange(len(ids))
    groups = [pad_sequences(tokenizer, [ids[i] for i in batch]) for batch in batches]
    texts = list(unique)
    ordered = [texts[i] for batch in batches for i in batch]
    return groups, {f: torch.from_numpy(rank[p]) for f, p in positions.items()}, ordered


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
