"""BERTScore's rescaling baselines: reading one (``{"P", "R", "F"}``) and computing one from a corpus, as
``bertscore-baseline`` writes it: the mean scores of random pairs of different sentences."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from lightning_metrics.errors import InputError, LightningMetricsError


def load_baseline(baseline: str | os.PathLike | dict) -> dict[str, float]:
    """A baseline as ``{"P": b, "R": b, "F": b}``, from a dict or a ``bertscore-baseline`` JSON file."""
    if isinstance(baseline, dict):
        values = baseline
    else:
        try:
            values = json.loads(Path(baseline).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(str(baseline), f"not a readable baseline JSON file ({e})") from None
    missing = [k for k in ("P", "R", "F") if not isinstance(values.get(k), (int, float))]
    if missing:
        raise InputError(str(baseline), f"baseline lacks numeric {missing}")
    return {k: float(values[k]) for k in ("P", "R", "F")}


def compute_baseline(scorer, corpus: Sequence[str], n_pairs: int = 5000, seed: int = 0) -> dict:
    """The rescaling baseline of ``scorer`` (a :class:`~lightning_metrics.baselines.bertscore.BERTScorer`): mean
    P, R and F of ``n_pairs`` seeded random pairs of different sentences."""
    sentences = list(dict.fromkeys(s for s in corpus if s.strip()))
    if len(sentences) < 2:
        raise LightningMetricsError(f"a baseline needs at least 2 different sentences; the corpus has {len(sentences)}")
    rng = np.random.default_rng(seed)
    first = rng.integers(0, len(sentences), size=n_pairs)
    offset = rng.integers(1, len(sentences), size=n_pairs)  # never pairs a sentence with itself
    second = (first + offset) % len(sentences)
    saved, scorer.baseline = scorer.baseline, None
    try:
        result = scorer.score([sentences[i] for i in first], [sentences[j] for j in second])
    finally:
        scorer.baseline = saved
    return {
        "P": float(result.precision.mean()),
        "R": float(result.recall.mean()),
        "F": float(result.f1.mean()),
        "model": scorer.model_name,
        "layer": scorer.layer,
        "idf": scorer.idf,
        "n_pairs": int(n_pairs),
        "seed": int(seed),
        "n_sentences": len(sentences),
    }
