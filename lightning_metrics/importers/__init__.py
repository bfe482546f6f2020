"""Peers' checkpoints as our verified export folders (``lightning-metrics import``).

- unbabel-comet checkpoint folders (``checkpoints/model.ckpt`` beside ``hparams.yaml``):
  ``RegressionMetric``, ``ReferencelessRegression`` and ``RankingMetric`` (:mod:`.comet`);
- bleurt-pytorch folders (``BleurtForSequenceClassification``, BERT- or RemBERT-based) (:mod:`.bleurt`);
- MetricX-23 and MetricX-24 folders (``MT5ForRegression``) (:mod:`.metricx`).

A source (and an ``encoder``) may be a hub id (``Unbabel/wmt22-comet-da``), resolved through Hugging
Face's cache (:mod:`lightning_metrics.storage.hub`); the export records the id and revision.

Each reader turns a peer's files into a :class:`PeerModel`: one of our families, its
hyper-parameters, and every weight under our names. :func:`import_metric` builds the family from
the encoder's config alone, loads the weights strictly (a weight missing, left over or of another
shape is an error, never a silent substitute) and writes the folder through
:mod:`lightning_metrics.storage.artifact`. It then scores, and fine-tunes with ``init_from``, like any
export of ours. Nothing pickled runs: checkpoints are read with ``weights_only=True``.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import partial
from pathlib import Path
from typing import Optional

import torch

from lightning_metrics.errors import InputError
from lightning_metrics.importers import bleurt, comet, metricx
from lightning_metrics.importers.peer import REBUILT_BUFFERS, PeerModel
from lightning_metrics.storage.hub import local_or_hub


def read_peer(path: str | os.PathLike, encoder: Optional[str] = None, **metricx_options) -> PeerModel:
    """The :class:`PeerModel` of a COMET checkpoint (folder or ``.ckpt``), a bleurt-pytorch folder or a
    MetricX folder (``metricx_options``: ``tokenizer``, ``version``, ``mode``)."""
    if comet.is_comet(path):
        return comet.read_comet(path, encoder)
    if bleurt.is_bleurt(path):
        return bleurt.read_bleurt(path)
    if metricx.is_metricx(path):
        return metricx.read_metricx(path, **metricx_options)
    if not Path(path).exists():
        raise InputError(str(path), "no such file or folder")
    checkpoint, hparams = comet.locate(path)
    if checkpoint.suffix == ".ckpt" and checkpoint.is_file():
        raise InputError(str(hparams), "is missing: a COMET checkpoint needs the hparams.yaml beside its checkpoints/")
    raise InputError(
        str(path),
        "not a checkpoint this code imports: expected an unbabel-comet checkpoint (checkpoints/model.ckpt with "
        "hparams.yaml beside checkpoints/), a bleurt-pytorch folder (config.json of model_type bleurt) or a MetricX "
        "folder (config.json with architectures MT5ForRegression)",
    )


def build_peer_model(peer: PeerModel, where: str, encoder_folder: str):
    """Our model with every weight of ``peer`` (strict: see the module docstring), in eval mode;
    ``encoder_folder`` holds the encoder's config and tokenizer (:func:`encoders.save_encoder_files`)."""
    from lightning_metrics.models import FAMILIES
    from lightning_metrics.models.options import grouped

    # every weight comes from the peer: the encoder is built from its config alone
    model = FAMILIES[peer.family](encoder=encoder_folder, **grouped(peer.hparams), encoder_weights=False)
    state = {**_statistics(model), **peer.state}
    own = model.state_dict()
    state = {k: v for k, v in state.items() if k in own or not k.endswith(REBUILT_BUFFERS)}
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    mismatched = sorted(k for k in set(own) & set(state) if own[k].shape != state[k].shape)
    if missing or unexpected or mismatched:
        detail = "; ".join(
            f"{label} {names[:3]}{' ...' if len(names) > 3 else ''}"
            for label, names in (("missing", missing), ("unexpected", unexpected), ("other shapes", mismatched))
            if names
        )
        raise InputError(where, f"the weights do not fit {peer.family} on encoder {peer.encoder}: {detail}")
    model.load_state_dict(state, strict=True)
    return model.eval()


def _statistics(model) -> dict:
    """A peer's score is the head's raw output: target mean 0 and std 1, already set."""
    n = len(model.targets)
    return {"target_mean": torch.zeros(n), "target_std": torch.ones(n), "stats_ready": torch.tensor(True)}


def import_metric(
    path: str | os.PathLike,
    out: str | os.PathLike,
    encoder: Optional[str] = None,
    force: bool = False,
    raw_spans: bool = False,
    **metricx_options,
) -> Path:
    """Import the peer's checkpoint at ``path`` as an export folder ``out``; returns the folder.
    ``raw_spans``: a unified COMET model reports its token spans as unbabel-comet decodes them, not on
    word boundaries (for parity). ``metricx_options`` (``tokenizer``, ``version``, ``mode``) go to a
    MetricX folder's reader."""
    from lightning_metrics.encoders.loading import save_encoder_files
    from lightning_metrics.storage.artifact import write_export
    from lightning_metrics.training.export import metadata, model_card, save_model_files

    target = Path(out)
    if target.exists() and not force:
        raise InputError(str(target), "exists; pass --force to replace it")
    given = str(path)
    path, snapshot = local_or_hub(given)  # a hub id: its cached (or, online, downloaded) snapshot
    if encoder is not None:
        encoder = local_or_hub(encoder)[0]
    peer = read_peer(path, encoder, **metricx_options)
    if raw_spans:
        if "error_labels" not in peer.hparams:
            raise InputError(given, f"--raw-spans: a {peer.family} finds no error spans")
        peer.hparams["span_boundaries"] = "tokens"
    with tempfile.TemporaryDirectory(prefix="lm-import-") as folder:
        (peer.write_encoder or partial(save_encoder_files, peer.encoder))(folder)
        model = build_peer_model(peer, str(path), folder)
        trained = {k: peer.origin.get(k) for k in ("epoch", "global_step")}
        meta = metadata(model, {**trained, "checkpoint": Path(path).name}, dev={}, training_data={})
        origin = (
            peer.origin
            if snapshot is None
            else {**peer.origin, "hub": {"id": snapshot.repo, "revision": snapshot.revision}}
        )
        meta.update(encoder=peer.encoder, imported_from=origin)
        if peer.reserved_positions is not None:  # scoring truncates where the peer does
            meta["max_length"] = int(model.encoder.config.max_position_embeddings) - peer.reserved_positions
        if peer.max_length is not None:
            meta["max_length"] = peer.max_length
        return write_export(
            target, meta, lambda out_folder: save_model_files(model, out_folder), model_card(target.name, meta), force
        )


CONFIGS = {  # the shipped config each family fine-tunes with
    "CometEstimator": "configs/comet/estimator.yaml",
    "CometReferenceless": "configs/comet/referenceless.yaml",
    "CometRanker": "configs/comet/ranking.yaml",
    "BleurtRegressor": "configs/bleurt/finetune.yaml",
    "UnifiedMetric": "configs/recipes/error-spans.yaml",
    "MetricXRegressor": "configs/recipes/metricx-in-house.yaml",
}
ARCHITECTURE = (  # the hyper-parameters a fine-tuning model must share to take every weight
    "layer_mix",
    "layer",
    "layer_transform",
    "mix_layer_norm",
    "pooling",
    "hidden_sizes",
    "activation",
    "final_activation",
    "distance_eps",
    *("segments", "views", "view_weights", "span_weights", "error_labels", "word_layer", "decoding", "truncation"),
    "xcomet_mqm_weight",
    "version",
    "mode",
    "tied_embeddings",
)


def fine_tune_command(folder: str | os.PathLike, meta: dict) -> str:
    """The ``fit`` command that fine-tunes the import at ``folder`` with its own architecture."""
    from lightning_metrics.models.options import MOVED, grouped

    hparams = grouped(meta["hyper_parameters"])
    flags = [f"--model.init_args.init_from {folder}", f"--model.init_args.encoder {folder}"]
    groups: dict[str, dict] = {}
    for key in ARCHITECTURE:
        group, _, name = MOVED.get(key, key).rpartition(".")
        values = hparams.get(group, {}) if group else hparams
        if isinstance(values, dict) and name in values:
            groups.setdefault(group, {})[name] = values[name]
    for group, values in groups.items():  # a group as one YAML mapping: jsonargparse reads its nulls
        if group:
            text = ", ".join(f"{k}: {json.dumps(v)}" for k, v in values.items())
            flags.append(f"--model.init_args.{group} '{{{text}}}'")
        else:
            flags += [f"--model.init_args.{k} {json.dumps(v)}" for k, v in values.items()]
    config = CONFIGS[meta["family"]]
    return f"lightning-metrics fit --config {config} " + " ".join(flags) + " --data.init_args.train RATINGS"
