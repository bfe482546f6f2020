"""unbabel-comet checkpoints: ``RegressionMetric``, ``ReferencelessRegression``, ``RankingMetric``, and the
unified ``UnifiedMetric`` (CometKiwi) and ``XCOMETMetric``.

A COMET checkpoint folder holds ``hparams.yaml`` and ``checkpoints/model.ckpt``. As COMET's own
loader does, the class comes from ``hparams.yaml`` (``class_identifier``) and the other
hyper-parameters from the checkpoint, except that ``layer_transformation: sparsemax_patch`` in
``hparams.yaml`` means softmax (COMET's fix for its issue #244, applied to wmt22-comet-da).
Everything that changes a score is mapped: the layer mix (softmax or sparsemax, with or without
COMET's layer norm) or one fixed layer, the pooling, the estimator's hidden sizes, activation
and final activation, and the input segments (the family). A unified model keeps its segments, the
three views COMET scores a three-segment model in (mt+src, mt+ref, mt+src+ref: scores averaged, or
XCOMET's weights and span score), its word-level tagger and COMET's span decoding. The training settings (learning
rates, layer-wise decay, freezing) carry over too, so fine-tuning starts where COMET's would.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import torch
import yaml

from lightning_metrics.errors import InputError
from lightning_metrics.importers.peer import PeerModel
from lightning_metrics.models.modules import ACTIVATIONS, POOLINGS
from lightning_metrics.storage.artifact import sha256_of
from lightning_metrics.storage.checkpoint import read_checkpoint

HPARAMS = "hparams.yaml"
FAMILIES = {
    "regression_metric": ("RegressionMetric", "CometEstimator"),
    "referenceless_regression_metric": ("ReferencelessRegression", "CometReferenceless"),
    "ranking_metric": ("RankingMetric", "CometRanker"),
    "unified_metric": ("UnifiedMetric", "UnifiedMetric"),  # CometKiwi: one joined sequence, word-level tags
    "xcomet_metric": ("XCOMETMetric", "UnifiedMetric"),  # XCOMET: its score mixed with one from its spans
}
ENCODER_PREFIX = "encoder.model."
THREE_VIEWS = [["mt", "src"], ["mt", "ref"], ["mt", "src", "ref"]]  # how COMET reads a three-segment model
SPAN_WEIGHTS = [0.1667, 0.3333, 0.5]  # COMET's input_weights_spans
XCOMET_WEIGHTS = [0.12, 0.33, 0.33, 0.22]  # XCOMET's score_weights: the three views, then the span score


def locate(path: str | os.PathLike) -> tuple[Path, Path]:
    """``(checkpoint, hparams.yaml)`` of a COMET folder or ``.ckpt`` file (hparams two levels up)."""
    path = Path(path)
    if path.is_file():
        parents = path.resolve().parents
        return path, (parents[1] if len(parents) > 1 else parents[0]) / HPARAMS
    found = sorted((path / "checkpoints").glob("*.ckpt"))
    preferred = path / "checkpoints" / "model.ckpt"
    return (preferred if preferred.is_file() else (found[0] if found else preferred)), path / HPARAMS


def is_comet(path: str | os.PathLike) -> bool:
    checkpoint, hparams = locate(path)
    return checkpoint.is_file() and hparams.is_file()


def read_comet(path: str | os.PathLike, encoder: Optional[str] = None) -> PeerModel:
    """The :class:`PeerModel` of a COMET checkpoint; ``encoder`` overrides ``pretrained_model``."""
    checkpoint_path, hparams_path = locate(path)
    listed = _read_yaml(hparams_path)
    identifier = listed.get("class_identifier")
    if identifier not in FAMILIES:
        raise InputError(str(hparams_path), f"class_identifier {identifier!r} is not a COMET metric class")
    checkpoint = read_checkpoint(checkpoint_path)
    if not isinstance(checkpoint.get("state_dict"), dict):
        raise InputError(str(checkpoint_path), "not a COMET checkpoint (no state_dict)")
    hp = {**listed, **dict(checkpoint.get("hyper_parameters") or {})}
    if listed.get("layer_transformation") == "sparsemax_patch":
        hp["layer_transformation"] = "softmax"
    if identifier in ("unified_metric", "xcomet_metric"):
        hp["layer"] = hp.get("sent_layer", hp.get("layer", "mix"))
        hp["pool"] = "cls"  # the unified models read the first token of the layer mix
    peer_class, family = FAMILIES[identifier]
    pretrained = hp.get("pretrained_model")
    if encoder is None and not pretrained:
        raise InputError(str(hparams_path), "no pretrained_model names the encoder; pass --encoder FOLDER")
    return PeerModel(
        family=family,
        hparams=comet_hparams(hp, family, str(checkpoint_path), identifier),
        state=comet_state(checkpoint["state_dict"], str(checkpoint_path)),
        encoder=str(encoder or pretrained),
        origin={
            "peer": "unbabel-comet",
            "class": peer_class,
            "file": str(checkpoint_path),
            "sha256": sha256_of(checkpoint_path),
            "pretrained_model": pretrained,
            "epoch": checkpoint.get("epoch"),
            "global_step": checkpoint.get("global_step"),
        },
        reserved_positions=4,  # COMET tokenises to max_position_embeddings - 4 tokens
    )


def _read_yaml(path: Path) -> dict:
    try:
        value = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise InputError(str(path), f"not readable YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(value, dict):
        raise InputError(str(path), "does not hold a mapping of hyper-parameters")
    return value


def comet_hparams(hp: dict, family: str, where: str, identifier: str = "") -> dict:
    """Our hyper-parameters for COMET's ``hp`` (see the module docstring)."""
    layer = hp.get("layer", "mix")
    if layer != "mix" and not str(layer).isdigit():
        raise InputError(where, f"layer {layer!r} is neither 'mix' nor a layer number")
    pool = hp.get("pool", "avg")
    if pool not in POOLINGS:
        raise InputError(where, f"pool {pool!r} is not supported (supported: {', '.join(POOLINGS)})")
    dropout = float(hp.get("dropout") or 0.0)
    ours = {
        "targets": ["score"],
        "layer_mix": layer == "mix",
        "layer": None if layer == "mix" else int(layer),
        "layer_transform": "sparsemax" if hp.get("layer_transformation") == "sparsemax" else "softmax",
        "mix_layer_norm": bool(hp.get("layer_norm", True)),
        "mix_dropout": dropout,  # COMET drops layers from the mix at its one dropout rate
        "pooling": pool,
        "dropout": dropout,
        "lr_encoder": float(hp.get("encoder_learning_rate", 1e-5)),
        "lr_head": float(hp.get("learning_rate", 3e-5)),
        "layerwise_decay": float(hp.get("layerwise_decay", 0.95)),
        "nr_frozen_epochs": float(hp.get("nr_frozen_epochs", 0.0)),
        "keep_embeddings_frozen": bool(hp.get("keep_embeddings_frozen", False)),
    }
    if family == "CometRanker":
        return {**ours, "distance_eps": 1e-6}  # COMET's pairwise_distance adds 1e-6 to each difference
    for key in ("activations", "final_activation"):
        name = hp.get(key)
        if name is not None and str(name).lower() not in {a.lower() for a in ACTIVATIONS}:
            raise InputError(where, f"{key} {name!r} is not supported (supported: {', '.join(ACTIVATIONS)})")
    ours = {
        **ours,
        "hidden_sizes": [int(h) for h in hp.get("hidden_sizes", [3072, 1024])],
        "activation": str(hp.get("activations", "Tanh")),
        "final_activation": hp.get("final_activation"),
    }
    return {**ours, **unified_hparams(hp, identifier, where)} if family == "UnifiedMetric" else ours


def unified_hparams(hp: dict, identifier: str, where: str) -> dict:
    """What a ``UnifiedMetric`` or ``XCOMETMetric`` adds: its segments and the views COMET scores them in,
    the word level (labels, layer, loss weights), COMET's span decoding, and XCOMET's score mix."""
    xcomet = identifier == "xcomet_metric"
    segments = ["mt", "src", "ref"] if xcomet else list(hp.get("input_segments", ["mt", "src", "ref"]))
    word_level = xcomet or bool(hp.get("word_level_training", False))
    labels = list(hp.get("error_labels", ["minor", "major"])) if word_level else []
    weights = hp.get("cross_entropy_weights")
    three = len(segments) == 3
    out = {
        "segments": segments,
        "views": THREE_VIEWS if three else None,
        "view_weights": (XCOMET_WEIGHTS[:3] if xcomet else [1 / 3] * 3) if three else None,
        "span_weights": SPAN_WEIGHTS if three else None,
        "error_labels": labels,
        "word_layer": int(hp.get("word_layer", 24)),
        "word_weight": float(hp.get("loss_lambda", 0.65)) if word_level else 0.0,
        "word_class_weights": [float(w) for w in weights] if weights and len(weights) == len(labels) + 1 else None,
        "decoding": "comet",
        "truncation": "comet",
        "xcomet_mqm_weight": XCOMET_WEIGHTS[3] if xcomet else 0.0,
    }
    if not set(labels) <= {"minor", "major", "critical"}:
        raise InputError(where, f"error_labels {labels} are not minor/major/critical")
    return out


def comet_state(state: dict, where: str) -> dict[str, torch.Tensor]:
    """COMET's weights under our names: ``encoder.model.*`` to ``encoder.*`` (without the unused
    pooler), the layer-wise attention's scalars to ``layer_mix``, ``estimator.ff.*`` to ``head.*``."""
    ours, scalars, unknown = {}, {}, []
    for name, value in state.items():
        if name.startswith(ENCODER_PREFIX):
            if not name.startswith(ENCODER_PREFIX + "pooler."):
                ours["encoder." + name[len(ENCODER_PREFIX) :]] = value
        elif name.startswith("layerwise_attention.scalar_parameters."):
            scalars[int(name.rsplit(".", 1)[1])] = value.reshape(1)
        elif name == "layerwise_attention.gamma":
            ours["layer_mix.gamma"] = value.reshape(1)
        elif name.startswith("estimator.ff."):
            ours["head." + name[len("estimator.ff.") :]] = value
        elif name.startswith("hidden2tag."):  # the unified models' word-level tagger
            ours["token_head." + name[len("hidden2tag.") :]] = value
        elif not name.startswith(("layerwise_attention.dropout_", "wordloss.", "sentloss.")):
            # dropout buffers and the losses' class weights (cross_entropy_weights, in the hyper-parameters)
            unknown.append(name)
    if unknown:
        raise InputError(where, f"weights this import does not know: {unknown[:3]}")
    if scalars:
        if sorted(scalars) != list(range(len(scalars))):
            raise InputError(where, f"layer-wise attention scalars are not numbered 0..{len(scalars) - 1}")
        ours["layer_mix.weights"] = torch.cat([scalars[i] for i in range(len(scalars))])
    return ours
