"""Lightning data modules: human ratings (fine-tuning) and `generate` output (pre-training)."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import DataLoader

from lightning_metrics.data.batching import CrossEncoderCollate, LengthBucketSampler, RowsDataset, SentencesCollate
from lightning_metrics.data.readers import read_ratings
from lightning_metrics.encoders import load_tokenizer
from lightning_metrics.errors import InputError, LightningMetricsError


class MetricDataModule(pl.LightningDataModule):
    """What both data modules share: tokenizer, target statistics, group ids, loaders.

    ``targets`` are the columns the model regresses on (the first is the metric's score).
    ``lp_names``/``system_names`` map the integer ids in batches back to names.
    """

    def __init__(self, encoder: str = "default", targets: Sequence[str] = ("score",), batch_size: int = 16,
                 num_workers: int = 0, max_length: int = 256, seed: int = 0):
        super().__init__()
        self.encoder, self.targets = encoder, list(targets)
        self.batch_size, self.num_workers, self.max_length, self.seed = batch_size, num_workers, max_length, seed
        self.train_rows: dict[str, list] = {}
        self.val_rows: dict[str, list] = {}
        self.lp_names: list[str] = []
        self.system_names: list[str] = []
        self.target_mean: list[float] = []
        self.target_std: list[float] = []
        self._tokenizer = None

    # -- subclasses fill train_rows / val_rows in _load() --------------------------------------
    def _load(self) -> None:
        raise NotImplementedError

    def setup(self, stage: Optional[str] = None) -> None:
        if self.val_rows:
            return
        self._load()
        for name, rows in (("training", self.train_rows), ("validation", self.val_rows)):
            if not rows or not len(next(iter(rows.values()))):
                raise LightningMetricsError(f"the {name} split is empty")
        missing = [t for t in self.targets if t not in self.train_rows]
        if missing:
            raise LightningMetricsError(f"target column(s) {missing} not in the training data; it has {sorted(self.train_rows)}")
        values = np.asarray([self.train_rows[t] for t in self.targets], dtype=np.float64)
        self.target_mean = values.mean(axis=1).tolist() if self.targets else []
        self.target_std = np.maximum(values.std(axis=1), 1e-6).tolist() if self.targets else []
        self.lp_names = sorted({str(x) for x in self.train_rows.get("lp", []) + self.val_rows.get("lp", [])})
        self.system_names = sorted({str(x) for x in self.val_rows.get("system", [])})

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.encoder)
        return self._tokenizer

    def summary(self) -> dict:
        """What the model was trained on, for model cards: source, row counts, language pairs."""
        source = getattr(self, "train_path", None) or getattr(self, "data", None)
        count = lambda rows: len(next(iter(rows.values()))) if rows else 0  # noqa: E731
        return {"source": str(source), "kind": type(self).__name__, "train_rows": count(self.train_rows),
                "val_rows": count(self.val_rows), "language_pairs": list(self.lp_names)}

    @property
    def model(self):
        """The model this data module feeds (None outside a Trainer); it decides the batch layout."""
        trainer = getattr(self, "trainer", None)
        return getattr(trainer, "lightning_module", None) if trainer is not None else None

    @property
    def text_fields(self) -> tuple[str, ...]:
        """Text columns a batch carries: the model's (``train_fields``), else ``(mt, ref)``."""
        return tuple(getattr(self.model, "train_fields", ("mt", "ref")))

    def _collate(self):
        max_length = min(self.max_length, int(self.tokenizer.model_max_length))
        ids = ({n: i for i, n in enumerate(self.lp_names)}, {n: i for i, n in enumerate(self.system_names)})
        if getattr(self.model, "input_format", "cross") == "sentences":
            return SentencesCollate(self.tokenizer, max_length, self.text_fields, self.targets, *ids)
        return CrossEncoderCollate(self.tokenizer, max_length, self.targets, *ids)

    def _lengths(self, rows: dict) -> list[int]:
        """Token counts per row (all text fields), for length bucketing: characters mislead across scripts."""
        columns = [rows[f] for f in self.text_fields if f in rows]
        unique = list(dict.fromkeys(t for column in columns for t in column))
        counts = dict(zip(unique, map(len, self.tokenizer(unique, add_special_tokens=False)["input_ids"])))
        return [sum(counts[text] for text in texts) for texts in zip(*columns)]

    def train_dataloader(self) -> DataLoader:
        sampler = LengthBucketSampler(self._lengths(self.train_rows), self.batch_size, seed=self.seed)
        return DataLoader(RowsDataset(self.train_rows), batch_size=self.batch_size, sampler=sampler,
                          collate_fn=self._collate(), num_workers=self.num_workers, persistent_workers=self.num_workers > 0)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(RowsDataset(self.val_rows), batch_size=self.batch_size, shuffle=False,
                          collate_fn=self._collate(), num_workers=self.num_workers, persistent_workers=self.num_workers > 0)

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()


def split_by_group(keys: Sequence[str], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Row indices for (train, val): whole groups go to val, in seeded order, until ``fraction`` is reached."""
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    names = sorted(groups)
    order = np.random.default_rng(seed).permutation(len(names))
    val, target = [], fraction * len(keys)
    for g in order:
        if len(val) >= target:
            break
        val += groups[names[g]]
    val_set = set(val)
    return [i for i in range(len(keys)) if i not in val_set], sorted(val)


def _columns_of(ds) -> dict[str, list]:
    return ds.to_dict()


class RatingsDataModule(MetricDataModule):
    """Human ratings (DA z-scores, MQM, ...) for fine-tuning.

    ``train`` is read with the project's readers. Without ``val``, a ``val_fraction`` of the
    rows goes to validation, split by ``val_split_by`` (whole documents: ``lp`` + ``doc_id``),
    so no source segment is in both splits.
    """

    def __init__(self, train: str, val: Optional[str] = None, val_fraction: float = 0.1, val_split_by: Optional[str] = "doc_id",
                 columns: Optional[dict] = None, on_invalid: str = "error", encoder: str = "default",
                 targets: Sequence[str] = ("score",), batch_size: int = 16, num_workers: int = 0, max_length: int = 256, seed: int = 0):
        super().__init__(encoder, targets, batch_size, num_workers, max_length, seed)
        for path in (train, val):
            if path is not None and not Path(path).exists():
                raise InputError(path, "data file not found")
        self.train_path, self.val_path, self.val_fraction, self.val_split_by = train, val, val_fraction, val_split_by
        self.columns, self.on_invalid = columns, on_invalid

    def _read(self, path: str) -> dict[str, list]:
        return _columns_of(read_ratings(path, columns=self.columns, required=(*self.text_fields, *self.targets), on_invalid=self.on_invalid))

    def _load(self) -> None:
        rows = self._read(self.train_path)
        if self.val_path is not None:
            self.train_rows, self.val_rows = rows, self._read(self.val_path)
            return
        n = len(rows["mt"])
        if self.val_split_by is None:
            keys = [str(i) for i in range(n)]
        elif self.val_split_by not in rows:
            raise InputError(self.train_path, f"no column {self.val_split_by!r} to split validation by; give data.val, or set data.val_split_by: null")
        else:
            keys = [f"{lp}\t{doc}" for lp, doc in zip(rows.get("lp", [""] * n), rows[self.val_split_by])]
        train_idx, val_idx = split_by_group(keys, self.val_fraction, self.seed)
        self.train_rows = {k: [v[i] for i in train_idx] for k, v in rows.items()}
        self.val_rows = {k: [v[i] for i in val_idx] for k, v in rows.items()}


def generate_files(data: str) -> list[str]:
    """The Parquet shards of a ``generate`` output folder (or a glob of them), sorted."""
    return sorted(glob.glob(str(Path(data) / "data-*.parquet"))) if Path(data).is_dir() else sorted(glob.glob(data))


def read_generate_output(data: str, max_rows: Optional[int] = None) -> dict[str, list]:
    """All rows of ``generate`` output (a folder or a glob of ``data-*.parquet``) as columns."""
    import pyarrow.parquet as pq

    files = generate_files(data)
    if not files:
        raise InputError(data, "no generate output here (expected data-*.parquet files)")
    tables = [pq.read_table(f).to_pydict() for f in files]
    rows = {k: [v for t in tables for v in t[k]] for k in tables[0]}
    return rows if max_rows is None else {k: v[:max_rows] for k, v in rows.items()}


PRETRAIN_TARGETS = ("score", "bleu", "chrf", "rouge1", "rouge2", "rougeL", "bertscore_p", "bertscore_r", "bertscore_f")


class PretrainDataModule(MetricDataModule):
    """The Parquet shards ``generate`` writes; validation holds out whole reference sentences."""

    def __init__(self, data: str, val_fraction: float = 0.05, encoder: str = "default", targets: Sequence[str] = PRETRAIN_TARGETS,
                 batch_size: int = 16, num_workers: int = 0, max_length: int = 256, seed: int = 0, max_rows: Optional[int] = None):
        super().__init__(encoder, targets, batch_size, num_workers, max_length, seed)
        if not generate_files(data):
            raise InputError(data, "no generate output here (expected data-*.parquet files)")
        self.data, self.val_fraction, self.max_rows = data, val_fraction, max_rows

    def _load(self) -> None:
        rows = read_generate_output(self.data, self.max_rows)
        missing = [f for f in self.text_fields if f not in rows]
        if missing:
            raise InputError(self.data, f"this model reads {list(self.text_fields)} but the generate output has no {missing} (run generate on a parallel corpus for src)")
        train_idx, val_idx = split_by_group([str(x) for x in rows["sentence_id"]], self.val_fraction, self.seed)
        self.train_rows = {k: [v[i] for i in train_idx] for k, v in rows.items()}
        self.val_rows = {k: [v[i] for i in val_idx] for k, v in rows.items()}
