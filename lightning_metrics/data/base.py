"""What every data module shares (:class:`MetricDataModule`): tokenizer, batch layout, target and
signal statistics, group ids, loaders; and the split of rows into training and validation by group."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import DataLoader

from lightning_metrics.data.batching import (
    CrossEncoderCollate,
    LengthBucketSampler,
    RowsDataset,
    SentencesCollate,
    SourceGroupSampler,
)
from lightning_metrics.encoders import load_tokenizer
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.inference import GPU_BATCH_TOKENS
from lightning_metrics.resume import ResumableLoader
from lightning_metrics.signals import SignalSpec, compute_signals
from lightning_metrics.tables import n_rows

log = logging.getLogger(__name__)

SAMPLERS = ("length", "source")
INPUT_FORMATS = ("cross", "sentences")  # one sequence per row, or each unique sentence encoded once


class MetricDataModule(pl.LightningDataModule):
    """What every data module shares: tokenizer, target statistics, group ids, signals, loaders.

    ``targets`` are the columns the model regresses on (the first is the metric's score).
    ``input_format`` and ``text_fields`` are the batch layout the model reads: ``cross``
    (:class:`CrossEncoderCollate`, one sequence per row) or ``sentences`` (:class:`SentencesCollate`)
    over those text columns (``fit`` links them from the model; in Python pass ``**model.batch_layout``).
    ``lp_names``/``system_names`` map the integer ids in batches back to names. ``signals``
    (linked from a hybrid model) adds each row's signal values, computed once per distinct pair
    and cached in ``cache_dir`` (default ``~/.cache/lightning-metrics/signals``).
    """

    def __init__(
        self,
        encoder: str = "default",
        targets: Sequence[str] = ("score",),
        batch_size: int = 16,
        num_workers: int = 0,
        max_length: int = 256,
        seed: int = 0,
        sampler: str = "length",
        signals: Optional[list[str]] = None,
        signal_encoder: str = "default",
        signal_layer: Optional[int] = None,
        cache_dir: Optional[str] = None,
        input_format: str = "cross",
        text_fields: Sequence[str] = ("mt", "ref"),
    ):
        super().__init__()
        if sampler not in SAMPLERS:
            raise LightningMetricsError(f"data.sampler must be one of {SAMPLERS}, got {sampler!r}")
        if input_format not in INPUT_FORMATS:
            raise LightningMetricsError(f"data.input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
        self.input_format, self.text_fields = input_format, tuple(text_fields)
        self.encoder, self.targets = encoder, list(targets)
        self.batch_size, self.num_workers, self.max_length, self.seed = batch_size, num_workers, max_length, seed
        self.sampler = sampler
        self.signal_spec = SignalSpec(tuple(signals), signal_encoder, signal_layer) if signals else None
        self.cache_dir = cache_dir or str(Path.home() / ".cache" / "lightning-metrics" / "signals")
        self.signal_mean: list[float] = []
        self.signal_std: list[float] = []
        self.train_rows: dict[str, list] = {}
        self.val_rows: dict[str, list] = {}
        self.lp_names: list[str] = []
        self.system_names: list[str] = []
        self.target_mean: list[float] = []
        self.target_std: list[float] = []
        self._tokenizer = None
        self._resume: Optional[dict] = None

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
            raise LightningMetricsError(
                f"target column(s) {missing} not in the training data; it has {sorted(self.train_rows)}"
            )
        values = np.asarray([self.train_rows[t] for t in self.targets], dtype=np.float64)
        self.target_mean = values.mean(axis=1).tolist() if self.targets else []
        self.target_std = np.maximum(values.std(axis=1), 1e-6).tolist() if self.targets else []
        self.lp_names = sorted({str(x) for x in self.train_rows.get("lp", []) + self.val_rows.get("lp", [])})
        self.system_names = sorted({str(x) for x in self.val_rows.get("system", [])})
        if self.signal_spec is not None:
            self._add_signals()

    def _add_signals(self) -> None:
        from lightning_metrics.parallel import default_num_proc

        n_train = len(self.train_rows["mt"])
        mt, ref = self.train_rows["mt"] + self.val_rows["mt"], self.train_rows["ref"] + self.val_rows["ref"]
        values = compute_signals(self.signal_spec, mt, ref, self.cache_dir, num_proc=default_num_proc())
        self.signal_mean = values[:n_train].mean(axis=0).tolist()
        self.signal_std = np.maximum(values[:n_train].std(axis=0), 1e-6).tolist()
        self.train_rows["signals"], self.val_rows["signals"] = list(values[:n_train]), list(values[n_train:])

    def statistics(self) -> dict[str, list[float]]:
        """Means and standard deviations of the training targets (and signals), for standardisation."""
        return {
            "target_mean": self.target_mean,
            "target_std": self.target_std,
            "signal_mean": self.signal_mean,
            "signal_std": self.signal_std,
        }

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.encoder)
        return self._tokenizer

    def summary(self) -> dict:
        """What the model was trained on, for model cards: source, row counts, language pairs."""
        source = getattr(self, "train_path", None) or getattr(self, "data", None)
        return {
            "source": str(source),
            "kind": type(self).__name__,
            "train_rows": n_rows(self.train_rows),
            "val_rows": n_rows(self.val_rows),
            "language_pairs": list(self.lp_names),
        }

    def _collate(self):
        max_length = min(self.max_length, int(self.tokenizer.model_max_length))
        ids = ({n: i for i, n in enumerate(self.lp_names)}, {n: i for i, n in enumerate(self.system_names)})
        if self.input_format == "sentences":
            group_tokens = GPU_BATCH_TOKENS if self.on_gpu else None
            return SentencesCollate(
                self.tokenizer, max_length, self.text_fields, self.targets, *ids, group_tokens=group_tokens
            )
        return CrossEncoderCollate(self.tokenizer, max_length, self.targets, *ids)

    @property
    def on_gpu(self) -> bool:
        """Whether the trainer runs on CUDA: batches then go through pinned memory, in fewer encoder calls."""
        device = getattr(getattr(getattr(self, "trainer", None), "strategy", None), "root_device", None)
        return device is not None and device.type == "cuda"

    def _lengths(self, rows: dict, split: str = "training") -> list[int]:
        """Token counts per row (all text fields), for length bucketing: characters mislead across scripts.
        Rows longer than ``max_length`` (with special tokens) are counted in a warning: never cut silently."""
        columns = {f: rows[f] for f in self.text_fields if f in rows}
        unique = list(dict.fromkeys(t for column in columns.values() for t in column))
        counts = dict(
            zip(unique, map(len, self.tokenizer(unique, add_special_tokens=False, verbose=False)["input_ids"]))
        )
        per_row = [[counts[text] for text in texts] for texts in zip(*columns.values())]
        limit = min(self.max_length, int(self.tokenizer.model_max_length))
        if self.input_format == "sentences":
            cut = sum(max(row) + 2 > limit for row in per_row)
        else:
            cut = sum(sum(row) + 3 > limit for row in per_row)
        if cut:
            log.warning(
                "%d of %d %s rows are longer than max_length %d tokens and are truncated (data.init_args.max_length)",
                cut,
                len(per_row),
                split,
                limit,
            )
        return [sum(row) for row in per_row]

    def train_dataloader(self) -> DataLoader:
        lengths = self._lengths(self.train_rows)
        if self.sampler == "source":
            if "group" not in self.train_rows:
                raise LightningMetricsError(
                    "data.sampler: source needs rows grouped by source (ratings with src or ref)"
                )
            sampler = SourceGroupSampler(self.train_rows["group"], lengths, self.batch_size, seed=self.seed)
        else:
            sampler = LengthBucketSampler(lengths, self.batch_size, seed=self.seed)
        return ResumableLoader(
            RowsDataset(self.train_rows),
            batch_size=self.batch_size,
            sampler=sampler,
            resume=self._resume,
            collate_fn=self._collate(),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            pin_memory=self.on_gpu,
        )

    def state_dict(self) -> dict:
        """Saved in every checkpoint: where the training loader stands in its epoch (lightning_metrics.resume)."""
        loader = getattr(self.trainer, "train_dataloader", None) if self.trainer is not None else None
        return {"train_loader": loader.state_dict()} if isinstance(loader, ResumableLoader) else {}

    def load_state_dict(self, state_dict: dict) -> None:
        self._resume = state_dict.get("train_loader")

    def val_dataloader(self) -> DataLoader:
        self._lengths(self.val_rows, "validation")  # the truncation count
        return DataLoader(
            RowsDataset(self.val_rows),
            batch_size=self.batch_size,
            shuffle=False,
            collate_fn=self._collate(),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            pin_memory=self.on_gpu,
        )

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
