"""`LearnedMetric`: an exported metric folder, loaded for scoring.

Scoring streams the input in chunks (memory stays bounded however many lines come in). Within
a chunk:

- cross-encoders (BLEURT-style) see pairs sorted by length, in batches;
- sentence models (COMET-style) embed each *unique* sentence of the chunk once, sorted by
  length, then run the cheap head over the rows. Rows are grouped by reference (or source)
  before chunking, so a source or reference shared by many systems is encoded once.

Scores come back in input order. ``devices > 1`` scores with Lightning's DDP prediction
(``ddp_spawn``); every rank writes its ``[index, score]`` rows and the parent puts them back
in input order, dropping the repeats a distributed sampler pads with.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from pytorch_lightning.callbacks import BasePredictionWriter

from lightning_metrics import __version__
from lightning_metrics.errors import InputError, LightningMetricsError

MAX_LENGTH = 256  # tokens per sequence, as in training
CHUNK_ROWS = 16384


class LearnedMetric:
    """A folder written by ``lightning-metrics export``; reads JSON, safetensors and tokenizer files, never a pickle."""

    def __init__(self, path: str | Path):
        from safetensors.torch import load_file

        from lightning_metrics.export import FORMAT_VERSION, _families, folder_hash

        self.path = Path(path)
        meta_path = self.path / "metric.json"
        if not meta_path.is_file():
            raise InputError(str(self.path), "not an exported metric folder (no metric.json)")
        try:
            self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InputError(str(meta_path), f"unreadable metric.json ({e.msg})") from None
        version = self.meta.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise InputError(str(self.path), f"format version {version} is newer than this code reads ({FORMAT_VERSION}); upgrade lightning-metrics")
        family = _families().get(self.meta.get("family"))
        if family is None:
            raise InputError(str(self.path), f"unknown metric family {self.meta.get('family')!r}")
        self.inputs = tuple(self.meta.get("inputs", family.inputs))
        self.model = family(**{**self.meta["hyper_parameters"], "encoder": str(self.path), "targets": self.meta["targets"]})
        self.model.load_state_dict(load_file(self.path / "model.safetensors"))
        self.model.eval()
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.max_length = min(MAX_LENGTH, int(self.tokenizer.model_max_length))
        self.signature = f"{self.path.name}|hash:{folder_hash(self.path)}|family:{self.meta['family']}|lightning-metrics:{__version__}"

    @property
    def needs_src(self) -> bool:
        return "src" in self.inputs

    @property
    def needs_ref(self) -> bool:
        return "ref" in self.inputs

    def score(self, mt: Sequence[str], ref: Sequence[str] | None = None, src: Sequence[str] | None = None,
              batch_size: int = 64, device: str = "cpu", devices: int = 1, progress: bool = False):
        """Segment scores in input order, their mean, and the signature (see the module docstring)."""
        from lightning_metrics.scoring import ScoreResult

        columns = self._columns(mt, ref, src)
        if devices > 1:
            out = self._score_distributed(columns, batch_size, device, devices, progress)
        else:
            out = self._score_local(columns, batch_size, device, progress)
        return ScoreResult(scores=out.tolist(), system_score=float(out.mean()) if len(out) else float("nan"), signature=self.signature)

    def _columns(self, mt, ref, src) -> dict[str, list[str]]:
        given = {"mt": mt, "ref": ref, "src": src}
        name = self.path.name
        if self.needs_ref and ref is None:
            raise LightningMetricsError(f"{name} needs references (ref=... or -r FILE)")
        if self.needs_src and src is None:
            raise LightningMetricsError(f"{name} needs sources (src=... or -s FILE)")
        lengths = {k: len(v) for k, v in given.items() if v is not None}
        if len(set(lengths.values())) > 1:
            raise LightningMetricsError("inputs differ in length: " + ", ".join(f"{n} {k}" for k, n in lengths.items()))
        return {k: list(given[k]) for k in self.inputs}

    # -- one process -------------------------------------------------------------------------
    def _score_local(self, columns: dict[str, list[str]], batch_size: int, device: str, progress: bool) -> np.ndarray:
        from tqdm.auto import tqdm

        target = torch.device(device)
        self.model.to(target)
        n = len(columns["mt"])
        out = np.zeros(n)
        sentences = self.model.input_format == "sentences"
        key = columns.get("ref") or columns.get("src")
        order = sorted(range(n), key=key.__getitem__) if sentences else list(range(n))  # shared ref/src in one chunk
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if target.type == "cuda" else torch.autocast("cpu", enabled=False)
        with torch.inference_mode(), autocast, tqdm(total=n, unit="seg", disable=not progress, desc="scoring") as bar:
            for start in range(0, n, CHUNK_ROWS):
                chunk = order[start : start + CHUNK_ROWS]
                rows = {k: [v[i] for i in chunk] for k, v in columns.items()}
                scores = self._chunk_sentences(rows, batch_size, target, bar) if sentences else self._chunk_cross(rows, batch_size, target, bar)
                out[chunk] = scores
        return out

    def _chunk_cross(self, rows: dict[str, list[str]], batch_size: int, target: torch.device, bar) -> np.ndarray:
        from lightning_metrics.data.batching import pad_sequences

        enc = self.tokenizer(rows["ref"], rows["mt"], truncation="longest_first", max_length=self.max_length)
        ids, types = enc["input_ids"], enc.get("token_type_ids")
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros(len(ids))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            inputs = pad_sequences(self.tokenizer, [ids[i] for i in idx], None if types is None else [types[i] for i in idx])
            out[idx] = self.model.predict_scores({"inputs": {k: v.to(target) for k, v in inputs.items()}}).float().cpu().numpy()
            bar.update(len(idx))
        return out

    def _chunk_sentences(self, rows: dict[str, list[str]], batch_size: int, target: torch.device, bar) -> np.ndarray:
        from lightning_metrics.data.batching import unique_sentence_groups

        groups, positions = unique_sentence_groups(self.tokenizer, self.max_length, rows, batch_size)
        n_rows, n_unique, done, vectors = len(rows["mt"]), sum(len(g["input_ids"]) for g in groups), 0, []
        for group in groups:
            vectors.append(self.model.embed({k: v.to(target) for k, v in group.items()}).float().cpu())
            bar.update(n_rows * (done + len(group["input_ids"])) // n_unique - n_rows * done // n_unique)  # rows, in proportion
            done += len(group["input_ids"])
        vectors = torch.cat(vectors)
        out = []
        for start in range(0, n_rows, 4096):  # the head is cheap: large row batches
            part = {f: vectors[p[start : start + 4096]].to(target) for f, p in positions.items()}
            out.append(self.model.scores_from_embeddings(part).float().cpu())
        return torch.cat(out).numpy()

    # -- several processes -------------------------------------------------------------------
    def _score_distributed(self, columns: dict[str, list[str]], batch_size: int, device: str, devices: int, progress: bool) -> np.ndarray:
        import pytorch_lightning as pl
        from torch.utils.data import DataLoader

        from lightning_metrics.data.batching import CrossEncoderCollate, RowsDataset, SentencesCollate

        n = len(columns["mt"])
        order = sorted(range(n), key=lambda i: sum(len(v[i]) for v in columns.values()))
        dataset = RowsDataset({k: [v[i] for i in order] for k, v in columns.items()})
        if self.model.input_format == "sentences":
            collate = SentencesCollate(self.tokenizer, self.max_length, self.inputs, [], {}, {})
        else:
            collate = CrossEncoderCollate(self.tokenizer, self.max_length, [], {}, {})
        gpu = device.startswith("cuda")
        with tempfile.TemporaryDirectory(prefix="lm-score-") as tmp:
            trainer = pl.Trainer(
                accelerator="gpu" if gpu else "cpu", devices=devices, strategy="ddp_spawn", precision="bf16-mixed" if gpu else "32-true",
                logger=False, enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=progress,
                callbacks=[RankRowsWriter(tmp)],
            )
            trainer.predict(self.model, DataLoader(dataset, batch_size=batch_size, collate_fn=collate), return_predictions=False)
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
