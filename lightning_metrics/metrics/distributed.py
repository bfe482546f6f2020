"""Scoring an exported metric on several devices with Lightning's DDP prediction (``ddp_spawn``): every
rank writes its ``[index, score]`` rows and the parent puts them back in input order, dropping the
repeats a distributed sampler pads with."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from pytorch_lightning.callbacks import BasePredictionWriter

from lightning_metrics.encoders.inference import CPU_BATCH_ROWS, ScoreOptions, resolve_precision
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.tables import take_rows


def score_distributed(
    metric, columns: dict[str, list[str]], options: ScoreOptions, signals: np.ndarray | None
) -> np.ndarray:
    """Scores of ``metric`` (a :class:`~lightning_metrics.metrics.learned.LearnedMetric`) on ``columns``
    over ``options.devices`` processes, in input order."""
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader

    from lightning_metrics.data.batching import CrossEncoderCollate, RowsDataset, SentencesCollate

    n = len(columns["mt"])
    order = sorted(range(n), key=lambda i: sum(len(v[i]) for v in columns.values()))
    table = take_rows(columns, order)
    if signals is not None:
        table["signals"] = list(signals[order])
    dataset = RowsDataset(table)
    if metric.model.input_format == "sentences":
        collate = SentencesCollate(metric.tokenizer, metric.max_length, metric.inputs, [], {}, {})
    else:
        collate = CrossEncoderCollate(metric.tokenizer, metric.max_length, [], {}, {})
    gpu = options.device.startswith("cuda")
    metric.set_precision(
        resolve_precision(metric.precision, options.device)
    )  # in the weights: the trainer runs 32-true
    with tempfile.TemporaryDirectory(prefix="lm-score-") as tmp:
        trainer = pl.Trainer(
            accelerator="gpu" if gpu else "cpu",
            devices=options.devices,
            strategy="ddp_spawn",
            precision="32-true",
            logger=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            enable_progress_bar=options.progress,
            callbacks=[RankRowsWriter(tmp)],
        )
        loader = DataLoader(
            dataset, batch_size=options.batch_size or CPU_BATCH_ROWS, collate_fn=collate
        )  # rows per rank and step
        trainer.predict(metric.model, loader, return_predictions=False)
        rows = np.concatenate([np.load(f) for f in sorted(Path(tmp).glob("rank-*.npy"))])
    positions, first = np.unique(rows[:, 0].astype(np.int64), return_index=True)  # padding repeats some rows
    if len(positions) != n or positions[0] != 0 or positions[-1] != n - 1:
        raise LightningMetricsError(f"distributed scoring returned {len(positions)} of {n} rows")
    out = np.zeros(n)
    out[np.asarray(order)] = rows[first, 1]
    return out


class RankRowsWriter(BasePredictionWriter):
    """Saves each rank's ``[index, score]`` prediction rows to ``rank-<r>.npy`` in ``folder``."""

    def __init__(self, folder: str):
        super().__init__(write_interval="batch")
        self.folder, self.rows = folder, []

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx=0):
        self.rows.append(prediction.detach().double().cpu().numpy())

    def on_predict_epoch_end(self, trainer, pl_module):
        rows = np.concatenate(self.rows) if self.rows else np.zeros((0, 2))
        np.save(Path(self.folder) / f"rank-{trainer.global_rank}.npy", rows)
