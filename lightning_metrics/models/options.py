"""A metric model's settings, in small typed groups: what reads the encoder (:class:`Readout`), the
head (:class:`Head`), the loss (:class:`Objective`) and the optimiser (:class:`Optimisation`).

LightningCLI reads them as nested keys (``model.init_args.optim.lr_encoder``); Python takes either
the dataclass or a dict (``CometEstimator(optim={"lr_encoder": 3e-5})``). Checkpoints and exports
store them as plain dicts. :func:`grouped` reads the flat hyper-parameters that exports and
checkpoints of earlier versions hold, and :data:`MOVED` says where each flat key went.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Optional

from lightning_metrics.errors import LightningMetricsError


@dataclass(frozen=True)
class Readout:
    """Token states to a vector: a ``layer_mix`` of every hidden layer (``layer_transform`` softmax or
    sparsemax, ``mix_layer_norm``, ``mix_dropout``), or else the one hidden state ``layer`` (0 the
    embeddings, the last by default); then ``pooling`` (avg, max, cls). ``cached_features``: a fit that
    never trains the encoder of a COMET-style family reads each sentence's pooled layers from the
    feature cache, computed once (:mod:`lightning_metrics.encoders.features`; avg and cls pooling)."""

    layer_mix: bool = True
    mix_dropout: float = 0.0
    layer_transform: str = "softmax"
    mix_layer_norm: bool = False
    layer: Optional[int] = None
    pooling: str = "avg"
    cached_features: bool = True


@dataclass(frozen=True)
class Head:
    """The feed-forward head: ``hidden_sizes``, ``activation`` and ``final_activation`` by ``torch.nn``
    name, ``dropout``; a ``source_bias`` per rating source (scoring uses the first source's); for a
    hybrid model, ``signal_skip`` (a linear path from the standardised signals to the output) and
    ``start_from``, a signal the model starts as (its skip weight 1, the head's last layer zero)."""

    hidden_sizes: tuple[int, ...] = (256,)
    activation: str = "Tanh"
    final_activation: Optional[str] = None
    dropout: float = 0.1
    source_bias: bool = False
    signal_skip: bool = True
    start_from: Optional[str] = None


@dataclass(frozen=True)
class Objective:
    """The loss: ``loss`` (mse or huber, with ``huber_delta``), per-target ``loss_weights``,
    ``clip_targets`` in standard deviations, a pairwise ranking term (``pairwise_weight``,
    ``pairwise_margin``), and ``l2_to_start``, a pull toward the ``init_from`` weights (L2-SP), or without
    ``init_from`` but with ``head.start_from``, toward the model as built: a correction to its baseline."""

    loss: str = "mse"
    loss_weights: Optional[dict] = None
    huber_delta: float = 1.0
    clip_targets: Optional[float] = None
    pairwise_weight: float = 0.0
    pairwise_margin: float = 0.1
    l2_to_start: float = 0.0


@dataclass(frozen=True)
class Optimisation:
    """AdamW: ``lr_encoder`` at the top layer, times ``layerwise_decay`` per layer below (embeddings
    lowest), ``lr_head`` for the rest, ``weight_decay``, linear warm-up over ``warmup_ratio`` of the
    steps then decay; the encoder frozen for the first ``nr_frozen_epochs`` (fractions allowed), its
    embeddings for the whole run with ``keep_embeddings_frozen``; ``trainable``, the parts a fit
    changes (``encoder``, ``layer_mix``, ``head``: ``[head]`` is head-only fine-tuning)."""

    lr_encoder: float = 2e-5
    lr_head: float = 3e-4
    layerwise_decay: float = 0.9
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    nr_frozen_epochs: float = 0.0
    keep_embeddings_frozen: bool = False
    trainable: tuple[str, ...] = ("encoder", "layer_mix", "head")


@dataclass(frozen=True)
class Adapters:
    """Low-rank adapters (LoRA, through ``peft``) on the encoder's linear layers whose names end in
    one of ``modules`` (query, key, value and dense: BERT's attention and feed-forward), of ``rank``
    (0: none) and scale ``alpha``/``rank``, with ``dropout``. The encoder's own weights stay frozen;
    export merges the adapters into them (:mod:`lightning_metrics.models.tuning`)."""

    rank: int = 0
    alpha: float = 16.0
    dropout: float = 0.0
    modules: tuple[str, ...] = ("query", "key", "value", "dense")


GROUPS = {"readout": Readout, "head": Head, "objective": Objective, "optim": Optimisation, "adapters": Adapters}
SIGNAL_KEYS = {"signals": "names", "signal_encoder": "encoder", "signal_layer": "layer"}
MOVED = {  # flat key of earlier versions -> where it lives now
    **{f.name: f"{group}.{f.name}" for group, cls in GROUPS.items() if group != "adapters" for f in fields(cls)},
    **{flat: f"signals.{key}" for flat, key in SIGNAL_KEYS.items()},
}


def as_group(cls, value, where: str):
    """``value`` (a ``cls``, a dict of its fields, or None) as a ``cls``; an unknown key is one line."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    values = asdict(value) if is_dataclass(value) else dict(value)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise LightningMetricsError(f"{where}.{unknown[0]} is not a setting; {where} has {', '.join(sorted(known))}")
    for f in fields(cls):  # lists (YAML, JSON) as the tuples the group holds
        if isinstance(f.default, tuple) and isinstance(values.get(f.name), list):
            values[f.name] = tuple(values[f.name])
    for f in fields(cls):  # jsonargparse reads a nested flag's null as the text None: it means None here
        if values.get(f.name) in ("None", "null") and "Optional" in str(f.type):
            values[f.name] = None
    return cls(**values)


def plain(value):
    """A dataclass (or a structure holding them) as plain dicts and lists, as checkpoints store it."""
    if is_dataclass(value):
        return {k: plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def grouped(hparams: dict) -> dict:
    """Hyper-parameters in today's groups: flat keys of earlier exports and checkpoints
    (``lr_encoder``, ``signals: [chrf]``, ``signal_layer``, ...) move into their group; grouped
    ones pass through."""
    out: dict = {}
    for key, value in hparams.items():
        if key == "signals" and (value is None or isinstance(value, dict)):
            if value is not None or not isinstance(out.get("signals"), dict):
                out["signals"] = value
        elif key in MOVED:
            group, name = MOVED[key].split(".")
            if not isinstance(out.get(group), dict):
                out[group] = {}
            out[group][name] = value
        else:
            out[key] = value
    if isinstance(out.get("signals"), dict) and not out["signals"].get("names"):
        out["signals"] = None
    return out
