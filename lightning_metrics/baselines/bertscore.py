"""BERTScore for any Hugging Face encoder: layer choice, IDF weights, baseline rescaling.

Formulas (as the bert-score package computes them): token embeddings from layer L, cosine matrix
between candidate tokens
ĥ_j and reference tokens r_i; ``P = Σ_j w_j max_i cos(ĥ_j, r_i) / Σ_j w_j``, ``R`` the same
from the reference side, ``F = 2PR/(P+R)``. Weights are 1 (or ``idf(w) = log((M+1)/(df(w)+1))``
over M reference sentences) and 0 for the special tokens ([CLS], [SEP], <s>, </s>); special
tokens may still be matched, as in the bert-score package. Rescaling: ``(x - b)/(1 - b)``.

**Empty text.** A candidate or reference with no tokens besides the special ones scores
P = R = F = 0 (before rescaling), as in the bert-score package.

Speed: each distinct sentence is embedded once (references repeat across systems), batches
are sorted by token length with dynamic padding, the encoder is cut after layer L, and
everything runs under ``torch.inference_mode()`` (bf16 weights on CUDA by default). Long inputs are
processed in chunks so memory stays bounded.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from lightning_metrics.baselines.rescaling import load_baseline
from lightning_metrics.encoders.inference import (
    attention_kernels,
    batch_limits,
    dtype_of,
    length_batches,
    resolve_device,
    resolve_precision,
    to_device,
)
from lightning_metrics.encoders.loading import DEFAULT_ENCODER, load_encoder
from lightning_metrics.encoders.sequences import pad_sequences
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.signature import Signature

# Default layer per encoder (index into hidden states: 0 = embeddings, N = last layer).
# From the bert-score package's tuned table for the models it knows; all-MiniLM-L6-v2 from a
# layer sweep on WMT21 DA (benchmarks/bertscore_layers.py), and so multilingual-e5-small (the
# same model as the hub's intfloat/multilingual-e5-small). Unknown encoders use the last layer.
DEFAULT_LAYERS = {
    "all-MiniLM-L6-v2": 4,
    "multilingual-e5-small": 7,
    "bert-base-uncased": 9,
    "bert-large-uncased": 18,
    "bert-base-multilingual-cased": 9,
    "roberta-base": 10,
    "roberta-large": 17,
    "xlm-roberta-base": 9,
    "xlm-roberta-large": 17,
    "distilbert-base-uncased": 5,
    "microsoft/deberta-base-mnli": 9,
    "microsoft/deberta-large-mnli": 18,
    "microsoft/deberta-xlarge-mnli": 40,
}
CHUNK_PAIRS = 20_000  # pairs whose embeddings are held at once: bounds memory on long inputs
MATCH_PAIRS_GPU = 4096  # pairs per greedy-matching batch on CUDA


def default_layer(model_name: str, num_layers: int) -> int:
    """The documented default layer for ``model_name`` (matched by name suffix), else the last."""
    name = str(model_name).rstrip("/")
    if name == DEFAULT_ENCODER:
        return DEFAULT_LAYERS["all-MiniLM-L6-v2"]
    for known, layer in DEFAULT_LAYERS.items():
        if name == known or name.endswith("/" + known.split("/")[-1]):
            return layer
    return num_layers


def greedy_match(
    sim: torch.Tensor,
    hyp_weights: torch.Tensor,
    ref_weights: torch.Tensor,
    hyp_mask: torch.Tensor | None = None,
    ref_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BERTScore's aggregation for a batch: ``sim`` is [B, Lh, Lr] cosine similarities.

    ``*_weights`` are [B, L] token weights (0 for special and padding tokens); ``*_mask`` mark
    real tokens (specials included: they can be matched, they are just not counted). Returns
    P, R and F, each [B]; a side whose weights sum to 0 scores 0.
    """
    b, lh, lr = sim.shape
    hyp_mask = torch.ones(b, lh, dtype=torch.bool, device=sim.device) if hyp_mask is None else hyp_mask.bool()
    ref_mask = torch.ones(b, lr, dtype=torch.bool, device=sim.device) if ref_mask is None else ref_mask.bool()
    sim = sim.masked_fill(~(hyp_mask[:, :, None] & ref_mask[:, None, :]), -torch.inf)
    best_for_hyp = sim.amax(dim=2).masked_fill(~hyp_mask, 0.0)
    best_for_ref = sim.amax(dim=1).masked_fill(~ref_mask, 0.0)
    hyp_total, ref_total = hyp_weights.sum(dim=1), ref_weights.sum(dim=1)
    p = (best_for_hyp * hyp_weights).sum(dim=1) / hyp_total.clamp_min(1e-30)
    r = (best_for_ref * ref_weights).sum(dim=1) / ref_total.clamp_min(1e-30)
    empty = (hyp_total == 0) | (ref_total == 0)
    p, r = p.masked_fill(empty, 0.0), r.masked_fill(empty, 0.0)
    f = (2 * p * r / (p + r)).nan_to_num(0.0)
    return p, r, f


def idf_weights(token_ids: Sequence[Sequence[int]]) -> tuple[dict[int, float], float]:
    """``idf(w) = log((M+1)/(df(w)+1))`` over M token-id sequences; also the unseen-token value."""
    df = Counter(t for ids in token_ids for t in set(ids))
    m = len(token_ids)
    return {t: math.log((m + 1) / (c + 1)) for t, c in df.items()}, math.log(m + 1)


def shown_settings(model_name: str, layer: int, idf: bool, rescaled: bool, precision: str) -> dict:
    """The settings a signature shows: model, layer, IDF, rescaling, precision."""
    model = "all-MiniLM-L6-v2" if model_name == DEFAULT_ENCODER else model_name
    yes = lambda flag: "yes" if flag else "no"  # noqa: E731
    return {"model": model, "layer": layer, "idf": yes(idf), "rescaled": yes(rescaled), "precision": precision}


def settings_of(
    model: str | os.PathLike = DEFAULT_ENCODER, layer: int | None = None, idf: bool = False, baseline=None,
    precision: str | None = None, device: str = "cpu",
) -> dict:  # fmt: skip
    """The settings a :class:`BERTScorer` of these arguments shows, read from the encoder's config alone
    (nothing is loaded): what a signature needs before anything is scored."""
    from transformers import AutoConfig

    from lightning_metrics.encoders.loading import resolve_encoder

    if layer is None:
        config = AutoConfig.from_pretrained(resolve_encoder(model))
        layer = default_layer(str(model), int(config.num_hidden_layers))
    chosen = resolve_precision(precision, torch.device(resolve_device(device)))
    return shown_settings(str(model), int(layer), idf, baseline is not None, chosen)


@dataclass
class BERTScoreResult:
    """Per-pair precision, recall and F1 (numpy arrays, input order)."""

    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray

    def as_dict(self) -> dict[str, list[float]]:
        return {
            "bertscore_p": self.precision.tolist(),
            "bertscore_r": self.recall.tolist(),
            "bertscore_f": self.f1.tolist(),
        }


class BERTScorer:
    """Scores candidate/reference pairs with one encoder, kept in memory between calls.

    ``layer`` defaults to :data:`DEFAULT_LAYERS` (the last layer for unknown encoders).
    ``idf=True`` weights tokens by IDF over ``idf_corpus`` (default: the references passed to
    :meth:`score`). ``baseline`` (a dict or a ``bertscore-baseline`` JSON file) turns on
    rescaling. ``device`` is ``"cpu"``, ``"cuda"`` or ``"auto"``; ``precision`` is ``fp32``, ``bf16``
    (the encoder's weights in bfloat16) or ``auto`` (bf16 on CUDA, else fp32). ``batch_size`` caps
    the sentences per encoder batch (default: :func:`~lightning_metrics.encoders.inference.batch_limits`).
    """

    def __init__(
        self,
        model: str | os.PathLike = DEFAULT_ENCODER,
        layer: int | None = None,
        idf: bool = False,
        idf_corpus: Sequence[str] | None = None,
        baseline: str | os.PathLike | dict | None = None,
        batch_size: int | None = None,
        device: str = "cpu",
        precision: str | None = None,
        progress: bool | None = None,
        chunk_pairs: int = CHUNK_PAIRS,
    ):
        self.model_name = str(model)
        encoder, self.tokenizer = load_encoder(model)
        n_layers = int(encoder.config.num_hidden_layers)
        self.layer = default_layer(self.model_name, n_layers) if layer is None else int(layer)
        if not 0 <= self.layer <= n_layers:
            raise LightningMetricsError(
                f"layer {self.layer} is out of range for {self.model_name}: choose 0..{n_layers}"
            )
        self.device = torch.device(resolve_device(device))
        self.precision = resolve_precision(precision, self.device)
        self.encoder = _truncate(encoder, self.layer).eval().to(self.device, dtype_of(self.precision))
        self.batch_size, self.progress, self.chunk_pairs = batch_size, progress, int(chunk_pairs)
        self.idf = idf
        self.baseline = load_baseline(baseline) if baseline is not None else None
        self.max_length = min(
            int(self.tokenizer.model_max_length), int(getattr(encoder.config, "max_position_embeddings", 512))
        )
        ids = (
            self.tokenizer.cls_token_id,
            self.tokenizer.sep_token_id,
            self.tokenizer.bos_token_id,
            self.tokenizer.eos_token_id,
        )
        self.special_ids = {i for i in ids if i is not None}
        self._idf = self._idf_from(idf_corpus) if idf and idf_corpus is not None else None

    @property
    def settings(self) -> dict:
        """What decides the numbers: model, layer, IDF, rescaling, precision."""
        return shown_settings(self.model_name, self.layer, self.idf, self.baseline is not None, self.precision)

    @property
    def signature(self) -> str:
        """How the numbers were made, sacrebleu-style (the package's version is not part of it)."""
        return str(Signature("bertscore", tuple(self.settings.items())))

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids with special tokens, stripped and truncated as the bert-score package does."""
        out = self.tokenizer(
            [s.strip() for s in sentences], add_special_tokens=True, truncation=True, max_length=self.max_length
        )
        return out["input_ids"]

    def _idf_from(self, corpus: Sequence[str]) -> tuple[dict[int, float], float]:
        return idf_weights(self.tokenize(list(corpus)))

    def _weights(self, ids: list[int], idf: tuple[dict[int, float], float] | None) -> list[float]:
        if idf is None:
            return [0.0 if t in self.special_ids else 1.0 for t in ids]
        table, unseen = idf
        return [0.0 if t in self.special_ids else table.get(t, unseen) for t in ids]

    def score(
        self, cands: Sequence[str], refs: Sequence[str], batch_size: int | None = None, progress: bool | None = None
    ) -> BERTScoreResult:
        """P, R and F1 for each (candidate, reference) pair; rescaled when a baseline is set. ``batch_size``
        and ``progress`` apply to this call (default: the scorer's own); nothing of a call is kept."""
        batch_size = self.batch_size if batch_size is None else batch_size
        progress = self.progress if progress is None else progress
        cands, refs = list(cands), list(refs)
        if len(cands) != len(refs):
            raise ValueError(f"{len(cands)} candidates but {len(refs)} references")
        idf = (self._idf or self._idf_from(refs)) if self.idf else None
        p, r, f = (np.zeros(len(cands), dtype=np.float64) for _ in range(3))
        bar = _progress_bar(len(cands), progress)
        for start in range(0, len(cands), self.chunk_pairs):
            stop = min(start + self.chunk_pairs, len(cands))
            tick = (
                None
                if bar is None
                else (lambda done, start=start, stop=stop: _advance(bar, start + round((stop - start) * done)))
            )
            cp, cr, cf = self._score_chunk(cands[start:stop], refs[start:stop], idf, batch_size, tick)
            p[start:stop], r[start:stop], f[start:stop] = cp, cr, cf
        if bar is not None:
            bar.close()
        if self.baseline is not None:
            b = self.baseline
            p, r, f = (p - b["P"]) / (1 - b["P"]), (r - b["R"]) / (1 - b["R"]), (f - b["F"]) / (1 - b["F"])
        return BERTScoreResult(precision=p, recall=r, f1=f)

    def token_embeddings(self, sentences: Sequence[str]) -> tuple[list[list[int]], list[torch.Tensor]]:
        """Each sentence's token ids (as :meth:`tokenize` makes them) and unit-normalised layer-L vectors
        ``[tokens, H]`` (special tokens included), on the CPU."""
        ids = self.tokenize(list(sentences))
        tokens, offsets = self._embed(ids, self.batch_size)
        tokens = tokens.cpu()
        return ids, [tokens[o : o + len(x)] for o, x in zip(offsets.tolist(), ids)]

    def _score_chunk(self, cands: list[str], refs: list[str], idf, batch_size, tick=None) -> tuple[np.ndarray, ...]:
        unique = list(dict.fromkeys(cands + refs))
        index = {s: i for i, s in enumerate(unique)}
        ids = self.tokenize(unique)
        tokens, offsets = self._embed(ids, batch_size, tick)
        lengths = np.asarray([len(x) for x in ids], dtype=np.int64)
        weights = torch.tensor(np.concatenate([self._weights(x, idf) for x in ids] + [[0.0]]), dtype=torch.float32)
        weights = weights.to(self.device)
        hyp = np.asarray([index[s] for s in cands], dtype=np.int64)
        ref = np.asarray([index[s] for s in refs], dtype=np.int64)
        # match in batches of pairs with similar lengths, so padding stays small
        order = np.lexsort((lengths[ref], lengths[hyp]))
        prf = torch.zeros(3, len(cands), device=self.device)
        match_batch = MATCH_PAIRS_GPU if self.device.type == "cuda" else max(batch_size or 0, 256)
        for start in range(0, len(order), match_batch):
            batch = order[start : start + match_batch]
            hyp_at, hyp_mask = _token_index(offsets, lengths, hyp[batch], len(tokens) - 1, self.device)
            ref_at, ref_mask = _token_index(offsets, lengths, ref[batch], len(tokens) - 1, self.device)
            sim = torch.bmm(tokens[hyp_at], tokens[ref_at].transpose(1, 2))
            prf[:, torch.from_numpy(batch).to(self.device)] = torch.stack(
                greedy_match(sim, weights[hyp_at], weights[ref_at], hyp_mask, ref_mask)
            )
        p, r, f = prf.cpu().double().numpy()
        return p, r, f

    def _embed(self, ids: list[list[int]], batch_size: int | None, tick=None) -> tuple[torch.Tensor, np.ndarray]:
        """Unit-normalised layer-L token embeddings of every sentence, float32 on the scorer's device:
        ``[total tokens + 1, H]`` (the last row is zeros, for padding) and each sentence's first row.

        ``tick(fraction_done)`` is called after each batch (drives the progress bar)."""
        lengths = np.asarray([len(x) for x in ids], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        out = torch.zeros(int(lengths.sum()) + 1, int(self.encoder.config.hidden_size), device=self.device)
        batches = length_batches(lengths, *batch_limits(self.device, batch_size), longest_first=True)
        done = 0
        with torch.inference_mode(), attention_kernels():
            for batch in batches:
                padded = pad_sequences(self.tokenizer, [ids[k] for k in batch])
                mask = padded["attention_mask"].numpy().astype(bool)
                inputs = {
                    "input_ids": padded["input_ids"],
                    "attention_mask": padded["attention_mask"],
                    "rows": torch.from_numpy(np.flatnonzero(mask)),
                    "to": torch.from_numpy(_spans(offsets[batch], lengths[batch])),
                }
                inputs = to_device(inputs, self.device)
                # no mask when nothing is padded: attention takes its faster unmasked path
                attention_mask = None if bool(mask.all()) else inputs["attention_mask"]
                hidden = self.encoder(input_ids=inputs["input_ids"], attention_mask=attention_mask).last_hidden_state
                out[inputs["to"]] = torch.nn.functional.normalize(hidden.float().flatten(0, 1)[inputs["rows"]], dim=-1)
                done += len(batch)
                if tick is not None:
                    tick(done / len(ids))
        return out, offsets


def bertscore(
    cands: Sequence[str],
    refs: Sequence[str],
    model: str | os.PathLike = DEFAULT_ENCODER,
    layer: int | None = None,
    idf: bool = False,
    baseline: str | os.PathLike | dict | None = None,
    batch_size: int = 64,
    device: str = "cpu",
    precision: str | None = None,
) -> BERTScoreResult:
    """One-call BERTScore: ``bertscore(cands, refs).f1``. Build a :class:`BERTScorer` to reuse a model."""
    scorer = BERTScorer(
        model, layer=layer, idf=idf, baseline=baseline, batch_size=batch_size, device=device, precision=precision
    )
    return scorer.score(cands, refs)


def _truncate(model, layer: int):
    """Drop the layers above ``layer`` so they cost nothing; last_hidden_state is then layer L."""
    for owner, attr in (
        (getattr(model, "encoder", None), "layer"),
        (getattr(model, "transformer", None), "layer"),
        (model, "layers"),
    ):
        if owner is not None and isinstance(getattr(owner, attr, None), torch.nn.ModuleList):
            setattr(owner, attr, torch.nn.ModuleList(list(getattr(owner, attr))[:layer]))
            return model
    raise LightningMetricsError(
        f"cannot select a layer in a {type(model).__name__}: no encoder.layer / transformer.layer / layers list"
    )


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``start, start+1, ..., start+length-1`` for each pair, concatenated."""
    return (
        np.concatenate([np.arange(s, s + n) for s, n in zip(starts.tolist(), lengths.tolist())])
        if len(starts)
        else np.zeros(0, np.int64)
    )


def _token_index(
    offsets: np.ndarray, lengths: np.ndarray, sentences: np.ndarray, pad_row: int, device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, L]`` rows of the token table for ``sentences`` (``pad_row`` past each one's end) and the
    mask of real tokens."""
    width = int(lengths[sentences].max()) if len(sentences) else 0
    mask = np.arange(width)[None, :] < lengths[sentences][:, None]
    rows = np.where(mask, offsets[sentences][:, None] + np.arange(width)[None, :], pad_row)
    moved = to_device({"rows": torch.from_numpy(rows), "mask": torch.from_numpy(mask)}, torch.device(device))
    return moved["rows"], moved["mask"]


def _advance(bar, position: int) -> None:
    bar.update(position - bar.n)


def _progress_bar(total: int, progress: bool | None):
    if progress is False or (progress is None and total < 2000):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="BERTScore", unit="pair")
