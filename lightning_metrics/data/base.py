"""What every data module shares (:class:`MetricDataModule`): tokenizer, batch layout, target and
signal statistics, group ids, loaders; and the split of rows into training and validation by group."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import DataLoader

from lightning_metrics.baselines.signals import SignalSpec, compute_signals, signal_spec
from lightning_metrics.data.batching import (
    CrossEncoderCollate,
    LengthBucketSampler,
    RowsDataset,
    SegmentsCollate,
    SentencesCollate,
    SourceGroupSampler,
    TemplateCollate,
)
from lightning_metrics.data.loader import ResumableLoader
from lightning_metrics.encoders.inference import GPU_BATCH_TOKENS
from lightning_metrics.encoders.loading import length_limit, load_tokenizer
from lightning_metrics.encoders.sequences import BatchLayout
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.storage.cache import cache_dir
from lightning_metrics.tables import n_rows

log = logging.getLogger(__name__)

SAMPLERS = ("length", "source")


@dataclass(frozen=True)
class Batching:
    """How rows become batches: ``batch_size`` rows, ``max_length`` tokens per sequence (longer ones
    are counted and cut), ``sampler`` ``length`` (length-bucketed batches) or ``source`` (the outputs
    of one source together, which the pairwise loss needs), loader ``num_workers``."""

    batch_size: int = 16
    max_length: int = 256
    sampler: str = "length"
    num_workers: int = 0


class MetricDataModule(pl.LightningDataModule):
    """What every data module shares: tokenizer, target statistics, group ids, signals, loaders.

    ``targets`` are the columns the model regresses on (the first is the metric's score).
    ``layout`` (:class:`~lightning_metrics.encoders.sequences.BatchLayout`) is the batch layout the
    model reads: ``cross`` (:class:`CrossEncoderCollate`, one sequence per row) or ``sentences``
    (:class:`SentencesCollate`) over its text columns (``fit`` links it from the model; in Python pass
    ``layout=model.batch_layout``). ``batches`` (:class:`Batching`) sizes the batches.
    ``lp_names``/``system_names`` map the integer ids in batches back to names. ``signals`` (linked
    from a hybrid model) adds each row's signal values, computed once per distinct pair and cached in
    ``cache_dir`` (default: ``signals`` in the cache folder, :mod:`~lightning_metrics.storage.cache`).
    """

    def __init__(
        self,
        encoder: str = "default",
        targets: Sequence[str] = ("score",),
        batches: Batching = Batching(),
        seed: int = 0,
        signals: Optional[SignalSpec] = None,
        cache_dir: Optional[str] = None,
        layout: BatchLayout = BatchLayout(),
    ):
        super().__init__()
        batches = batches if isinstance(batches, Batching) else Batching(**dict(batches))
        layout = layout if isinstance(layout, BatchLayout) else BatchLayout(**dict(layout))
        if batches.sampler not in SAMPLERS:
            raise LightningMetricsError(f"data.batches.sampler must be one of {SAMPLERS}, got {batches.sampler!r}")
        self.input_format, self.text_fields = layout.input_format, tuple(layout.text_fields)
        self.template = layout.template
        self.encoder, self.targets, self.seed = encoder, list(targets), seed
        self.batch_size, self.num_workers, self.max_length = batches.batch_size, batches.num_workers, batches.max_length
        self.sampler = batches.sampler
        self.signal_spec = signal_spec(signals)
        self.cache_dir = cache_dir
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
        folder = self.cache_dir or cache_dir("signals")
        values = compute_signals(self.signal_spec, mt, ref, folder, num_proc=default_num_proc())
        self.signal_mean = values[:n_train].mean(axis=0).tolist()
        self.signal_std = np.maximum(values[:n_train].std(axis=0), 1e-6).tolist()
        self.train_rows["signals"], self.val_rows["signals"] = list(values[:n_train]), list(values[n_train:])

    def distinct_texts(self) -> list[str]:
        """Every distinct text of the model's text fields, training rows then validation rows."""
        seen: dict[str, None] = {}
        for rows in (self.train_rows, self.val_rows):
            for field in self.text_fields:
                seen.update(dict.fromkeys(rows.get(field, [])))
        return list(seen)

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
        """What the model was trained on, for model cards and exports: source, row counts, language pairs,
        and the tokens per sequence it saw (an export scores with that ``max_length`` by default)."""
        source = getattr(self, "train_path", None) or getattr(self, "data", None)
        return {
            "source": str(source),
            "kind": type(self).__name__,
            "train_rows": n_rows(self.train_rows),
            "val_rows": n_rows(self.val_rows),
            "language_pairs": list(self.lp_names),
            "max_length": self.sequence_length(),
        }

    def sequence_length(self) -> int:
        """Tokens per sequence in batches: ``max_length``, or the tokenizer's limit when smaller."""
        return min(self.max_length, length_limit(self.tokenizer))

    def _collate(self):
        max_length = self.sequence_length()
        ids = ({n: i for i, n in enumerate(self.lp_names)}, {n: i for i, n in enumerate(self.system_names)})
        if self.input_format == "sentences":
            group_tokens = GPU_BATCH_TOKENS if self.on_gpu else None
            return SentencesCollate(
                self.tokenizer, max_length, self.text_fields, self.targets, *ids, group_tokens=group_tokens
            )
        if self.input_format == "segments":
            return SegmentsCollate(self.tokenizer, max_length, self.text_fields, self.targets, *ids)
        if self.input_format == "template":
            return TemplateCollate(self.tokenizer, max_length, self.template, self.targets, *ids)
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
        limit = self.sequence_length()
        if self.input_format == "sentences":
            cut = sum(max(row) + 2 > limit for row in per_row)
        else:
            cut = sum(sum(row) + len(row) + 1 > limit for row in per_row)
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
        """Saved in every checkpoint: where the training loader stands in its epoch (data.loader)."""
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
