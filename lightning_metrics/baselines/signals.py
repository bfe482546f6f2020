"""Signals: built-in metric scores of a (candidate, reference) pair, as training targets or inputs.

``generate`` records them as pre-training targets; a hybrid model (``signals: [...]``) reads
them beside its sentence embeddings, so it never knows less than its baselines. Names are the
built-in metrics' (:mod:`lightning_metrics.metrics.builtin`): ``bleu`` and ``chrf`` (0-100),
``rouge1/2/L`` (0-1), ``bertscore_p/r/f`` (BERTScore with ``encoder`` at ``layer``).

:func:`compute_signals` scores each distinct pair once and can keep the values in a cache
folder, keyed by the signal settings and the pair's text, so a second run over the same data
computes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from lightning_metrics.atomic import atomic_path
from lightning_metrics.baselines.scores import BERTSCORE, LEXICAL, baseline_scores
from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.errors import LightningMetricsError

LEXICAL_SIGNALS = LEXICAL
BERTSCORE_SIGNALS = BERTSCORE
ALL_SIGNALS = LEXICAL_SIGNALS + BERTSCORE_SIGNALS


@dataclass(frozen=True)
class SignalSpec:
    """Which signals (``names``), and the BERTScore ``encoder`` and ``layer`` they use (the layer
    defaults to BERTScore's for that encoder). A model's ``signals`` and its data module's are one
    of these, linked by ``fit``."""

    names: tuple[str, ...]
    encoder: str = "default"
    layer: Optional[int] = None

    def __post_init__(self):
        object.__setattr__(self, "names", tuple(self.names or ()))
        unknown = [n for n in self.names if n not in ALL_SIGNALS]
        if unknown or not self.names:
            raise LightningMetricsError(f"unknown signal(s) {unknown or '[]'}; choose from {list(ALL_SIGNALS)}")

    @property
    def needs_encoder(self) -> bool:
        return any(n in BERTSCORE_SIGNALS for n in self.names)

    def resolved(self) -> "SignalSpec":
        """The same spec with BERTScore's default layer for the encoder filled in."""
        if self.layer is not None or not self.needs_encoder:
            return self
        return SignalSpec(self.names, self.encoder, resolve_layer(self.encoder))

    def key(self) -> str:
        spec = self.resolved()
        text = json.dumps(
            {"names": list(spec.names), "encoder": str(spec.encoder), "layer": spec.layer}, sort_keys=True
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def signal_spec(value) -> Optional[SignalSpec]:
    """``value`` (a :class:`SignalSpec`, a dict of its fields, or None) as a spec with its layer resolved."""
    if value is None:
        return None
    spec = value if isinstance(value, SignalSpec) else SignalSpec(**dict(value))
    return spec.resolved()


def resolve_layer(encoder: str) -> int:
    """BERTScore's documented default layer for ``encoder`` (read from its config alone)."""
    from transformers import AutoConfig

    from lightning_metrics.baselines.bertscore import default_layer
    from lightning_metrics.encoders.loading import resolve_encoder

    config = AutoConfig.from_pretrained(resolve_encoder(encoder))
    return default_layer(str(encoder), int(config.num_hidden_layers))


def _pair_key(mt: str, ref: str) -> str:
    return hashlib.sha1(f"{mt}\x00{ref}".encode("utf-8")).hexdigest()[:24]


def compute_signals(
    spec: SignalSpec,
    mt: Sequence[str],
    ref: Sequence[str],
    cache_dir: str | os.PathLike | None = None,
    num_proc: int = 1,
    options: ScoreOptions | None = None,
) -> np.ndarray:
    """``[len(mt), len(spec.names)]`` signal values, each distinct pair computed once (see the module docstring)."""
    if len(mt) != len(ref):
        raise LightningMetricsError(f"inputs differ in length: {len(mt)} mt, {len(ref)} ref")
    spec = spec.resolved()
    keys = [_pair_key(m, r) for m, r in zip(mt, ref)]
    cache_file = Path(cache_dir) / f"signals-{spec.key()}.npz" if cache_dir is not None else None
    known: dict[str, np.ndarray] = {}
    if cache_file is not None and cache_file.is_file():
        with np.load(cache_file) as stored:
            known = dict(zip(stored["keys"].tolist(), stored["values"]))
    todo = list(dict.fromkeys(k for k in keys if k not in known))
    if todo:
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        rows = [first[k] for k in todo]
        values = signal_values(spec, [mt[i] for i in rows], [ref[i] for i in rows], num_proc, options)
        block = np.stack([np.asarray(values[n], dtype=np.float64) for n in spec.names], axis=1)
        known.update(zip(todo, block))
        if cache_file is not None:
            with atomic_path(cache_file) as tmp:
                np.savez(tmp, keys=np.asarray(list(known)), values=np.stack(list(known.values())))
    return np.stack([known[k] for k in keys]) if keys else np.zeros((0, len(spec.names)))


def signal_values(
    spec: SignalSpec, mt: list[str], ref: list[str], num_proc: int = 1, options: ScoreOptions | None = None
) -> dict[str, list[float]]:
    """Each signal of ``spec`` per pair: the built-in metrics of those names with their default settings
    (BERTScore on ``spec.encoder`` at ``spec.layer``), through :mod:`~lightning_metrics.baselines.scores`."""
    bertscore = {"model": spec.encoder, "layer": spec.layer}
    return baseline_scores(
        spec.names, mt, ref, {"bertscore": bertscore}, options or ScoreOptions(device="cpu"), num_proc
    )
