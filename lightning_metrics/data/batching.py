"""Batching for training: a length-bucketed sampler and collators with dynamic padding."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from lightning_metrics.encoders.segments import encode_segments
from lightning_metrics.encoders.sequences import encode_pairs, pad_sequences, unique_sentence_groups
from lightning_metrics.encoders.template import encode_template
from lightning_metrics.spans import IGNORED_TOKEN, character_levels


class RowsDataset(Dataset):
    """Rows of a column dict; item ``i`` is ``{column: value}`` plus its ``index``."""

    def __init__(self, columns: dict[str, list]):
        self.columns = columns
        self.n = len(next(iter(columns.values()))) if columns else 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        row = {k: v[i] for k, v in self.columns.items()}
        row["index"] = i
        return row


class LengthBucketSampler(Sampler[int]):
    """Shuffled indices in which each run of ``batch_size`` has similar lengths.

    The data is shuffled, cut into pools of ``batch_size * pool_batches``, each pool sorted by
    length and cut into batches, and the batches shuffled. ``set_epoch`` (called by Lightning)
    reseeds, so epoch e is the same on every run and after a resume.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0, pool_batches: int = 50):
        self.lengths = np.asarray(lengths)
        self.batch_size, self.seed, self.pool = batch_size, seed, batch_size * pool_batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(len(self.lengths))
        batches = []
        for start in range(0, len(order), self.pool):
            pool = order[start : start + self.pool]
            pool = pool[np.argsort(self.lengths[pool], kind="stable")]
            batches += [pool[i : i + self.batch_size] for i in range(0, len(pool), self.batch_size)]
        for b in rng.permutation(len(batches)):
            yield from batches[b].tolist()


ROW_EXTRAS = {"weight": torch.float32, "group": torch.long, "source_id": torch.long}  # batched when the rows carry them


class SourceGroupSampler(Sampler[int]):
    """Shuffled indices in which the rows of one group (the outputs for one source) come together.

    Groups are shuffled, each group's rows are shuffled, and the stream is cut into batches of
    ``batch_size`` (a group may straddle two batches); the batches are then shuffled, with
    ``lengths`` ordering the groups inside pools of ``pool_batches`` batches so padding stays
    small. Seeded by ``(seed, epoch)`` like :class:`LengthBucketSampler`.
    """

    def __init__(
        self, groups: Sequence[int], lengths: Sequence[int], batch_size: int, seed: int = 0, pool_batches: int = 50
    ):
        self.groups, self.lengths = np.asarray(groups), np.asarray(lengths)
        self.batch_size, self.seed, self.pool_batches = batch_size, seed, pool_batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch, 1])
        members: dict[int, list[int]] = {}
        for i, g in enumerate(self.groups.tolist()):
            members.setdefault(g, []).append(i)
        names = list(members)
        order = [names[k] for k in rng.permutation(len(names))]
        pool_rows = self.batch_size * self.pool_batches
        stream: list[int] = []
        pool: list[int] = []
        filled = 0
        for position, g in enumerate(order):
            pool.append(g)
            filled += len(members[g])
            if filled >= pool_rows or position == len(order) - 1:
                pool.sort(key=lambda p: self.lengths[members[p]].mean())
                for p in pool:
                    stream += [members[p][k] for k in rng.permutation(len(members[p]))]
                pool, filled = [], 0
        batches = [stream[i : i + self.batch_size] for i in range(0, len(stream), self.batch_size)]
        for b in rng.permutation(len(batches)):
            yield from batches[b]


def _common(rows: list[dict], targets: Sequence[str], lp_ids: dict, system_ids: dict) -> dict:
    out = {
        "index": torch.tensor([r["index"] for r in rows], dtype=torch.long),
        "lp": torch.tensor([lp_ids.get(r.get("lp"), -1) for r in rows], dtype=torch.long),
        "system": torch.tensor([system_ids.get(r.get("system"), -1) for r in rows], dtype=torch.long),
    }
    if all(t in rows[0] for t in targets):
        out["targets"] = torch.tensor([[float(r[t]) for t in targets] for r in rows], dtype=torch.float32)
    for key, dtype in ROW_EXTRAS.items():
        if key in rows[0]:
            out[key] = torch.tensor([r[key] for r in rows], dtype=dtype)
    if "signals" in rows[0]:
        out["signals"] = torch.tensor(np.stack([r["signals"] for r in rows]), dtype=torch.float32)
    return out


class CrossEncoderCollate:
    """Tokenise ``[CLS] ref [SEP] mt [SEP]`` with dynamic padding; truncation trims the longer side first."""

    def __init__(self, tokenizer, max_length: int, targets: Sequence[str], lp_ids: dict, system_ids: dict):
        self.tokenizer, self.max_length, self.targets = tokenizer, max_length, list(targets)
        self.lp_ids, self.system_ids = lp_ids, system_ids

    def __call__(self, rows: list[dict]) -> dict:
        ids, types = encode_pairs(self.tokenizer, [r["ref"] for r in rows], [r["mt"] for r in rows], self.max_length)
        inputs = pad_sequences(self.tokenizer, ids, types)
        return {"inputs": inputs, **_common(rows, self.targets, self.lp_ids, self.system_ids)}


class SentencesCollate:
    """Tokenise each *unique* sentence of a batch once, for models that encode fields separately.

    ``fields`` (e.g. src, mt, ref) are looked up in every row. Sources and references repeat
    across systems, so a batch of 32 rows often holds far fewer than 96 distinct sentences. The
    unique sentences are sorted by token length and padded in groups of ``len(rows)``, so a long
    source does not pad every short output. The batch holds ``inputs`` (a list of padded groups,
    in sorted order) and ``positions[field]``: per row, the index of its sentence in the
    concatenation of the groups, and ``texts``, the unique sentences in that order (a fit on cached
    features reads them, :mod:`~lightning_metrics.encoders.features`). With ``group_tokens`` (on a
    GPU, where each encoder call costs launches rather than arithmetic) groups are cut by padded
    tokens instead: usually one per batch.
    """

    def __init__(
        self,
        tokenizer,
        max_length: int,
        fields: Sequence[str],
        targets: Sequence[str],
        lp_ids: dict,
        system_ids: dict,
        group_tokens: int | None = None,
    ):
        self.tokenizer, self.max_length, self.fields = tokenizer, max_length, list(fields)
        self.targets, self.lp_ids, self.system_ids, self.group_tokens = list(targets), lp_ids, system_ids, group_tokens

    def __call__(self, rows: list[dict]) -> dict:
        columns = {f: [r[f] for r in rows] for f in self.fields}
        size = (
            len(rows) * len(self.fields) if self.group_tokens else len(rows)
        )  # a token budget: as few groups as fit it
        groups, positions, texts = unique_sentence_groups(
            self.tokenizer, self.max_length, columns, size, self.group_tokens
        )
        common = _common(rows, self.targets, self.lp_ids, self.system_ids)
        return {"inputs": groups, "positions": positions, "texts": texts, **common}


class SegmentsCollate:
    """Rows as one sequence, ``[CLS] mt [SEP] ...`` over ``fields`` (mt first), for the unified family.

    Rows with ``spans`` (character spans into the mt, :mod:`~lightning_metrics.data.mqm`) also get
    ``token_labels`` [B, T]: each mt token's severity level (0 OK, 1 minor, 2 major, 3 critical; the
    highest over its characters), :data:`IGNORED_TOKEN` elsewhere. ``mt_offsets`` keep each row's mt
    token offsets, for turning token predictions back into character spans.
    """

    def __init__(self, tokenizer, max_length: int, fields: Sequence[str], targets: Sequence[str], lp_ids, system_ids):
        self.tokenizer, self.max_length, self.fields = tokenizer, max_length, list(fields)
        self.targets, self.lp_ids, self.system_ids = list(targets), lp_ids, system_ids
        if self.fields[0] != "mt":
            raise ValueError(f"the unified family reads mt first, got segments {self.fields}")

    def __call__(self, rows: list[dict]) -> dict:
        encoded = encode_segments(self.tokenizer, [[r[f] for r in rows] for f in self.fields], self.max_length)
        inputs = pad_sequences(self.tokenizer, encoded.ids, encoded.types)
        out = {
            "inputs": inputs,
            "mt_offsets": encoded.mt_offsets,
            "raw_offsets": encoded.raw_offsets,
            **_common(rows, self.targets, self.lp_ids, self.system_ids),
        }
        if "spans" in rows[0]:
            labels = torch.full_like(inputs["input_ids"], IGNORED_TOKEN)
            for i, (row, offsets) in enumerate(zip(rows, encoded.mt_offsets)):
                levels = character_levels(row["spans"], len(row["mt"]))
                for j, (a, b) in enumerate(offsets):
                    labels[i, 1 + j] = int(levels[a:b].max()) if b > a else 0
            out["token_labels"] = labels
        return out


class TemplateCollate:
    """One text per row from a MetricX template (``metricx-VERSION:MODE``), tokenised as MetricX does
    (cut to ``max_length``, end-of-sequence removed), padded."""

    def __init__(
        self, tokenizer, max_length: int, template: str, targets: Sequence[str], lp_ids: dict, system_ids: dict
    ):
        version, _, self.mode = template.removeprefix("metricx-").partition(":")
        self.tokenizer, self.max_length, self.version, self.targets = tokenizer, max_length, version, list(targets)
        self.lp_ids, self.system_ids = lp_ids, system_ids

    def __call__(self, rows: list[dict]) -> dict:
        columns = {f: [r[f] for r in rows] for f in ("src", "mt", "ref") if f in rows[0]}
        encoded = encode_template(self.tokenizer, self.version, self.mode, columns, self.max_length)
        inputs = pad_sequences(self.tokenizer, encoded.ids)
        return {"inputs": inputs, **_common(rows, self.targets, self.lp_ids, self.system_ids)}
