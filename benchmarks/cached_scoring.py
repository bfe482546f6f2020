"""Scoring many heads on one frozen encoder, and the signals-only combination they are credited against.

- :class:`CachedScorer`: the segment scores of a COMET-style model whose encoder is frozen, from the
  feature cache (each distinct sentence of the rows encoded once, whatever the number of checkpoints or
  fits scored); equal to ``load_metric(export).score`` within the cache's 1e-5 (the suite checks it on
  its final choice).
- :func:`fit_signals_only` / :func:`signals_only_scores`: a least-squares combination of the same
  signals (standardised on the training rows) fitted to the same training targets: what the learned
  part of a hybrid metric must beat.
"""

from __future__ import annotations

import numpy as np
import torch

from lightning_metrics.baselines.signals import compute_signals
from lightning_metrics.encoders.features import FeatureCache, cache_key, pooled_layer_features
from lightning_metrics.encoders.loading import load_tokenizer
from lightning_metrics.parallel import default_num_proc


class CachedScorer:
    """Scores of frozen-encoder models on fixed ``rows`` (``src``, ``mt``, ``ref``), ``max_length`` tokens."""

    def __init__(self, rows: dict, max_length: int):
        self.rows, self.max_length = rows, max_length
        self.tables: dict[str, object] = {}
        self.signals: dict[tuple, np.ndarray] = {}

    def table(self, model, tokenizer):
        key = cache_key(model.encoder, tokenizer, self.max_length, model.readout.pooling)
        name = str(sorted(key.items()))
        if name not in self.tables:
            cache = FeatureCache(key)
            texts = list(dict.fromkeys(t for f in ("src", "mt", "ref") for t in self.rows.get(f, [])))

            def encode(batch):
                return pooled_layer_features(model.encoder, tokenizer, batch, self.max_length, model.readout.pooling)

            cache.build(texts, encode)
            self.tables[name] = cache.table(texts)
        return self.tables[name]

    def signal_values(self, spec) -> np.ndarray | None:
        if spec is None:
            return None
        key = (tuple(spec.names), spec.encoder, spec.layer)
        if key not in self.signals:
            self.signals[key] = compute_signals(spec, self.rows["mt"], self.rows["ref"], num_proc=default_num_proc())
        return self.signals[key]

    @torch.no_grad()
    def scores(self, model) -> np.ndarray:
        """The model's segment scores on the rows (it must read its encoder's cached features)."""
        model.eval()
        table = self.table(model, load_tokenizer(model.hparams.encoder))
        vectors = {f: model.read_out_cached(*table.lookup(self.rows[f])) for f in model.inputs}
        signals = self.signal_values(model.signal_spec)
        if signals is not None:
            vectors["signals"] = torch.tensor(signals, dtype=torch.float32)
        return model.scores_from(model.from_embeddings(vectors)).double().numpy()


def fit_signals_only(signals: np.ndarray, targets, weights=None) -> dict:
    """Least-squares weights of standardised ``signals`` [n, k] (and an intercept) for ``targets``."""
    mean, std = signals.mean(axis=0), np.maximum(signals.std(axis=0), 1e-9)
    design = np.column_stack([(signals - mean) / std, np.ones(len(signals))])
    w = np.ones(len(signals)) if weights is None else np.asarray(weights, dtype=float)
    root = np.sqrt(w)[:, None]
    coef, *_ = np.linalg.lstsq(design * root, np.asarray(targets, dtype=float) * root[:, 0], rcond=None)
    return {"mean": mean.tolist(), "std": std.tolist(), "coef": coef.tolist()}


def signals_only_scores(fit: dict, signals: np.ndarray) -> np.ndarray:
    z = (signals - np.asarray(fit["mean"])) / np.asarray(fit["std"])
    return np.column_stack([z, np.ones(len(z))]) @ np.asarray(fit["coef"])
