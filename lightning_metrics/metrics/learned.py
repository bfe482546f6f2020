"""`LearnedMetric`: an exported metric folder, loaded for scoring.

Scoring streams the input in chunks (memory stays bounded however many lines come in). Within
a chunk:

- cross-encoders (BLEURT-style) see pairs sorted by length, in batches;
- sentence models (COMET-style) embed each *unique* sentence of the chunk once, sorted by
  length, then run the cheap head over the rows. Rows are grouped by reference (or source)
  before chunking, so a source or reference shared by many systems is encoded once.

Scores come back in input order. ``devices > 1`` scores with Lightning's DDP prediction
(:mod:`~lightning_metrics.metrics.distributed`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
import torch

from lightning_metrics.encoders.inference import (
    ScoreOptions,
    batch_limits,
    check_precision,
    dtype_of,
    length_batches,
    resolve_precision,
    to_device,
)
from lightning_metrics.encoders.loading import length_limit
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.metrics.base import Metric, Segments
from lightning_metrics.signature import Signature
from lightning_metrics.storage.artifact import METADATA, SIGNAL_ENCODER, WEIGHTS, read_export
from lightning_metrics.tables import take_rows

MAX_LENGTH = 512  # default tokens per sequence (the encoder's limit when smaller), as COMET
log = logging.getLogger(__name__)
CHUNK_ROWS = 16384
PROGRESS_FROM = 2000  # rows from which progress=None shows a bar


class LearnedMetric(Metric):
    """A folder written by ``lightning-metrics export``, verified against its manifest; never unpickles."""

    def __init__(self, path: str | Path, export=None, max_length: int | None = None, precision: str | None = "auto"):
        """``precision``: ``fp32``, ``bf16`` or ``auto`` (bf16 on CUDA, else fp32), see
        :mod:`lightning_metrics.encoders.inference`."""
        self.path = Path(path)
        self.precision = check_precision(precision)
        self.runs_in = "fp32"  # the precision the weights are in now (the last scoring's)
        self.export = export if export is not None else read_export(self.path)
        self.name = self.path.name
        self.model = build_model(self.export)
        self.inputs = tuple(self.export.meta.get("inputs", self.model.inputs))
        self.higher_is_better = bool(self.export.meta.get("higher_is_better", True))
        self.tokenizer = load_export_tokenizer(self.export)
        self.length_limit = length_limit(self.tokenizer, self.model.encoder)
        if max_length is not None and not 0 < int(max_length) <= self.length_limit:
            raise InputError(
                str(self.path), f"max_length {max_length} is outside 1..{self.length_limit}, the encoder's limit"
            )
        default = int(self.export.meta.get("max_length") or MAX_LENGTH)  # an import records its peer's truncation
        self.max_length = int(max_length) if max_length is not None else min(default, self.length_limit)
        self.shared_embeddings: dict | None = None  # sentence -> vector, shared by ensemble members with one encoder
        self._moving = threading.Lock()  # one thread at a time moves the weights between devices and precisions

    @property
    def meta(self) -> dict:
        return self.export.meta

    @property
    def signature(self) -> Signature:
        return self._signature(self.precision if self.precision != "auto" else self.runs_in)

    def _signature(self, precision: str) -> Signature:
        return Signature.of(
            self.name, hash=self.export.short_hash, family=self.export.family, system="mean", precision=precision
        )

    def signature_of(self, found: Segments) -> Signature:
        return self._signature(self.precision if self.precision != "auto" else found.precision or self.runs_in)

    def segment_scores(self, columns, options: ScoreOptions) -> list[float]:
        return self.segment_result(columns, options).scores

    def segment_result(self, columns, options: ScoreOptions) -> Segments:
        """Scores, a unified model's spans, and the rows cut to ``max_length``: all returned, nothing kept."""
        show = options.progress if options.progress is not None else len(columns["mt"]) >= PROGRESS_FROM
        options = options.replace(progress=show)
        truncated = self.count_truncated(columns)
        if truncated:
            log.warning(
                "%s: %d of %d rows are longer than max_length %d tokens and were truncated (the encoder allows up to "
                "%d)",
                self.name,
                truncated,
                len(columns["mt"]),
                self.max_length,
                self.length_limit,
            )
        signals = self.signals(columns, options)
        if options.devices > 1:
            if self.model.input_format == "segments":
                raise LightningMetricsError(f"{self.name}: a unified model scores on one device (--devices 1)")
            from lightning_metrics.metrics.distributed import score_distributed

            scores = score_distributed(self, columns, options, signals)
            return Segments(scores.tolist(), truncated=truncated, precision=self.runs_in)
        scores, spans, precision = self._score_local(columns, options, signals)
        return Segments(scores.tolist(), {} if spans is None else {"spans": spans}, truncated, precision)

    def stochastic_scores(self, columns, passes, seed, options: ScoreOptions) -> np.ndarray:
        """MC dropout: ``passes`` scorings with every dropout of the model on (``torch`` seeded per pass),
        each sentence embedded afresh in each pass."""
        if options.devices > 1:
            raise LightningMetricsError("--mc-dropout scores on one device (--devices 1)")
        show = options.progress if options.progress is not None else len(columns["mt"]) * passes >= PROGRESS_FROM
        options = options.replace(progress=show)
        signals = self.signals(columns, options)
        shared, self.shared_embeddings = self.shared_embeddings, None
        out = []
        try:
            self.model.train()
            for k in range(passes):
                torch.manual_seed(seed * 1_000_003 + k)
                out.append(self._score_local(columns, options, signals)[0])
        finally:
            self.model.eval()
            self.shared_embeddings = shared
        return np.stack(out)

    def count_truncated(self, columns: dict[str, list[str]]) -> int:
        """Rows with a sequence longer than ``max_length`` tokens: a sentence of any field (sentence
        models), or the ``ref``/``mt`` pair (cross-encoders)."""
        if self.model.input_format == "segments":
            from lightning_metrics.encoders.segments import encode_segments

            views = [[columns[f] for f in view] for view in self.model.views]
            cut = [encode_segments(self.tokenizer, v, self.max_length, self.model.truncation).truncated for v in views]
            return max(cut)
        if self.model.input_format == "template":
            return self._template(columns).truncated
        if self.model.input_format != "sentences":
            lengths = [len(ids) for ids in self.tokenizer(columns["ref"], columns["mt"], verbose=False)["input_ids"]]
            return sum(n > self.max_length for n in lengths)
        unique = list(dict.fromkeys(t for texts in columns.values() for t in texts))
        long = {
            t
            for t, ids in zip(unique, self.tokenizer(unique, verbose=False)["input_ids"])
            if len(ids) > self.max_length
        }
        return (
            sum(any(texts[i] in long for texts in columns.values()) for i in range(len(columns["mt"]))) if long else 0
        )

    def signals(self, columns: dict[str, list[str]], options: ScoreOptions) -> np.ndarray | None:
        """A hybrid model's signal values per row (with the BERTScore encoder saved in the export), else None."""
        spec = self.model.signal_spec
        if spec is None:
            return None
        from lightning_metrics.baselines.signals import compute_signals
        from lightning_metrics.parallel import default_num_proc

        return compute_signals(
            spec, columns["mt"], columns["ref"], num_proc=default_num_proc(), options=options.replace(batch_size=None)
        )

    # -- one process -------------------------------------------------------------------------
    def prepare(self, device: str) -> torch.device:
        """The model on ``device`` with its encoder in this metric's precision there."""
        target = torch.device(device)
        with self._moving:
            self.set_precision(resolve_precision(self.precision, target))
            self.model.to(target)
        return target

    def set_precision(self, precision: str) -> None:
        """The encoder's weights in ``precision`` (fp32 or bf16); the layer mix and the head stay fp32.
        Back to fp32, the export's own weights are loaded again (the bf16 copies were rounded)."""
        if precision != self.runs_in:
            self.model.encoder.to(dtype_of(precision))
            if precision == "fp32":
                self.model.load_state_dict(self.export.load_weights(), strict=False)
            self.runs_in = precision

    def _score_local(
        self, columns: dict[str, list[str]], options: ScoreOptions, signals: np.ndarray | None
    ) -> tuple[np.ndarray, list | None, str]:
        """Scores in input order, a unified model's spans per row (else None), and the precision used."""
        from tqdm.auto import tqdm

        target = self.prepare(options.device)
        precision = self.runs_in
        limits = batch_limits(target, options.batch_size)
        n = len(columns["mt"])
        out = np.zeros(n)
        sentences = self.model.input_format == "sentences"
        order = chunk_order(columns) if sentences else list(range(n))
        found = [None] * n if self.model.input_format == "segments" else None
        with torch.inference_mode(), tqdm(total=n, unit="seg", disable=not options.progress, desc="scoring") as bar:
            for start in range(0, n, CHUNK_ROWS):
                chunk = order[start : start + CHUNK_ROWS]
                rows = take_rows(columns, chunk)
                extra = None if signals is None else torch.tensor(signals[chunk], dtype=torch.float32)
                if found is not None:
                    scores, spans = self._chunk_segments(rows, limits, target, bar)
                    for position, row_spans in zip(chunk, spans):
                        found[position] = row_spans
                elif sentences:
                    scores = self._chunk_sentences(rows, limits, target, bar, extra)
                elif self.model.input_format == "template":
                    scores = self._chunk_template(rows, limits, target, bar)
                else:
                    scores = self._chunk_cross(rows, limits, target, bar, extra)
                out[chunk] = scores
        return out, found, precision

    def _chunk_cross(
        self, rows: dict[str, list[str]], limits: tuple, target: torch.device, bar, signals: torch.Tensor | None
    ) -> np.ndarray:
        from lightning_metrics.encoders.sequences import encode_pairs, pad_sequences

        ids, types = encode_pairs(self.tokenizer, rows["ref"], rows["mt"], self.max_length)
        parts, batches = [], length_batches([len(x) for x in ids], *limits)
        for idx in batches:
            inputs = pad_sequences(
                self.tokenizer, [ids[i] for i in idx], None if types is None else [types[i] for i in idx]
            )
            batch = {"inputs": to_device(inputs, target)}
            if signals is not None:
                batch["signals"] = signals[idx].to(target)
            parts.append(self.model.predict_scores(batch).float())
            bar.update(len(idx))
        out = np.zeros(len(ids))
        out[np.concatenate(batches)] = torch.cat(parts).cpu().numpy()  # one copy back
        return out

    def _template(self, rows: dict[str, list[str]]):
        from lightning_metrics.encoders.template import encode_template

        return encode_template(self.tokenizer, self.model.version, self.model.mode, rows, self.max_length)

    def _chunk_template(self, rows: dict[str, list[str]], limits: tuple, target: torch.device, bar) -> np.ndarray:
        """A MetricX model's scores: each row one text from its template, in batches sorted by length."""
        from lightning_metrics.encoders.sequences import pad_sequences

        ids = self._template(rows).ids
        out = np.zeros(len(ids))
        for idx in length_batches([len(x) for x in ids], *limits):
            inputs = to_device(pad_sequences(self.tokenizer, [ids[i] for i in idx]), target)
            out[idx] = self.model.predict_scores({"inputs": inputs}).float().cpu().numpy()
            bar.update(len(idx))
        return out

    def _chunk_segments(self, rows: dict[str, list[str]], limits: tuple, target: torch.device, bar):
        """Scores and error spans of a unified model's rows: each of its views one sequence per row, the
        rows in batches sorted by the longest view."""
        from lightning_metrics.encoders.segments import encode_segments
        from lightning_metrics.encoders.sequences import pad_sequences

        views = [
            encode_segments(self.tokenizer, [rows[f] for f in view], self.max_length, self.model.truncation)
            for view in self.model.views
        ]
        n = len(rows["mt"])
        scores, spans = np.zeros(n), [None] * n
        lengths = [max(len(v.ids[i]) for v in views) for i in range(n)]
        for idx in length_batches(lengths, *limits):
            padded = [pad_sequences(self.tokenizer, [v.ids[i] for i in idx], [v.types[i] for i in idx]) for v in views]
            batch = {
                "views": [to_device(inputs, target) for inputs in padded],
                "mt_offsets": [views[0].mt_offsets[i] for i in idx],
                "raw_offsets": [views[0].raw_offsets[i] for i in idx],
                "mt": [rows["mt"][i] for i in idx],
            }
            values, found = self.model.predict_spans(batch)
            scores[idx] = values.float().cpu().numpy()
            for i, row_spans in zip(idx, found):
                spans[i] = row_spans
            bar.update(len(idx))
        return scores, spans

    def _chunk_sentences(
        self, rows: dict[str, list[str]], limits: tuple, target: torch.device, bar, signals: torch.Tensor | None
    ) -> np.ndarray:
        n_rows = len(rows["mt"])
        unique = list(dict.fromkeys(t for texts in rows.values() for t in texts))
        cache = self.shared_embeddings
        missing = unique if cache is None else [t for t in unique if t not in cache]
        start = bar.n
        tick = lambda done: bar.update(start + n_rows * done // len(missing) - bar.n)  # noqa: E731 (rows, in proportion)
        vectors = self._embed(missing, limits, target, tick) if missing else None
        if not missing:
            bar.update(n_rows)
        if cache is not None:
            if missing:
                cache.update(zip(missing, vectors))
            vectors = torch.stack([cache[t] for t in unique])
        index = {t: i for i, t in enumerate(unique)}
        positions = {f: torch.tensor([index[t] for t in texts], device=vectors.device) for f, texts in rows.items()}
        out = []
        for first in range(0, n_rows, 4096):  # the head is cheap: large row batches
            part = {f: vectors[p[first : first + 4096]].to(target) for f, p in positions.items()}
            if signals is not None:
                part["signals"] = signals[first : first + 4096].to(target)
            out.append(self.model.scores_from_embeddings(part).float())
        return torch.cat(out).cpu().numpy()

    def _embed(self, sentences: list[str], limits: tuple, target: torch.device, tick=None) -> torch.Tensor:
        """fp32 vectors ``[len(sentences), H]`` on ``target`` of distinct ``sentences``, embedded in
        length-sorted batches; ``tick(sentences_done)`` after each batch."""
        from lightning_metrics.encoders.sequences import unique_sentence_groups

        groups, positions, _ = unique_sentence_groups(self.tokenizer, self.max_length, {"s": sentences}, *limits)
        parts, done = [], 0
        for group in groups:
            parts.append(self.model.embed(to_device(group, target)).float())
            done += len(group["input_ids"])
            if tick is not None:
                tick(done)
        return torch.cat(parts)[positions["s"].to(target)]

    def encoder_key(self) -> str:
        """A hash of the encoder and layer-mix weights: members with equal keys embed sentences alike."""
        import hashlib

        digest = hashlib.sha256()
        for name, tensor in sorted(self.model.state_dict().items()):
            if name.startswith(("encoder.", "layer_mix.")):
                digest.update(name.encode())
                digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()


def chunk_order(columns: dict[str, list[str]]) -> list[int]:
    """Rows grouped by their reference (else source), groups in order of first appearance, so rows
    that share sentences land in the same chunk of ``CHUNK_ROWS`` and each sentence is embedded
    once: a WMT table's systems of one segment, or one source's candidates in MBR reranking
    (sorting the texts alphabetically would scatter a source's pseudo-references over chunks)."""
    key = columns.get("ref") or columns.get("src")
    first: dict[str, int] = {}
    for i, text in enumerate(key):
        first.setdefault(text, i)
    return sorted(range(len(key)), key=lambda i: first[key[i]])


def build_model(export):
    """The metric model of a verified export, with its weights (built from the folder alone)."""
    from lightning_metrics.models import FAMILIES
    from lightning_metrics.models.options import grouped

    meta, folder = export.meta, str(export.path)
    family = FAMILIES.get(export.family)
    if family is None:
        raise InputError(folder, f"unknown metric family {export.family!r}; this code knows {sorted(FAMILIES)}")
    hparams = meta.get("hyper_parameters")
    if not isinstance(hparams, dict) or not isinstance(meta.get("targets"), list):
        raise InputError(folder, f"{METADATA} lacks hyper_parameters or targets")
    hparams = grouped(hparams)  # exports of earlier versions hold flat keys
    overrides = {"encoder": folder, "targets": meta["targets"], "init_from": None}
    if export.file(SIGNAL_ENCODER).is_dir() and hparams.get("signals"):
        # a hybrid model computes its signals with the encoder it was trained with, saved in the export, at the
        # layer it was trained with: exports of earlier versions record it in their signals block only
        layer = hparams["signals"].get("layer")
        if layer is None:
            layer = (meta.get("signals") or {}).get("layer")
        overrides["signals"] = {**hparams["signals"], "encoder": str(export.file(SIGNAL_ENCODER)), "layer": layer}
    try:
        model = family(**{**hparams, **overrides}, encoder_weights=False)  # every weight comes from the export
    except (TypeError, LightningMetricsError) as e:
        raise InputError(folder, f"{METADATA}: the hyper-parameters do not fit {export.family} ({e})") from None
    result = model.load_state_dict(export.load_weights(), strict=False)
    if result.missing_keys or result.unexpected_keys:
        detail = (
            f"missing {result.missing_keys[:3]}" if result.missing_keys else f"unexpected {result.unexpected_keys[:3]}"
        )
        raise InputError(folder, f"{WEIGHTS}: the weights do not fit {export.family}: {detail}")
    return model.eval()


def load_export_tokenizer(export):
    """The tokenizer saved in the export folder (never fetched from elsewhere)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(export.path), local_files_only=True)
    except (OSError, ValueError, TypeError) as e:
        raise InputError(str(export.path), f"the tokenizer files do not load ({str(e).splitlines()[0]})") from None
