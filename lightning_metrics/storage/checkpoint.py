"""Lightning checkpoints: the one reader (no pickled code runs), and the starting weights of ``init_from``.

:func:`read_checkpoint` serves export, resume checks and ``init_from`` alike: ``torch.load`` with
``weights_only=True``, and one :class:`~lightning_metrics.errors.InputError` naming the file when it
is missing, damaged or not a checkpoint. :func:`starting_weights` reads either a checkpoint or an
exported folder (through :mod:`lightning_metrics.storage.artifact`), and :func:`matching_weights` picks
what fits another model.
"""

from __future__ import annotations

import logging
import os
from typing import Optional

import torch

from lightning_metrics.errors import InputError
from lightning_metrics.storage.artifact import is_exported, read_export

log = logging.getLogger(__name__)
STATISTICS = ("target_mean", "target_std", "stats_ready")  # the data's, never carried to another run


def read_checkpoint(path: str | os.PathLike, label: Optional[str] = None, mmap: bool = False) -> dict:
    """A Lightning checkpoint's dictionary; ``label`` names the file in errors (default: the path)."""
    where = label or str(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise InputError(where, "checkpoint file not found") from None
    except Exception as e:  # noqa: BLE001 - a truncated zip, not a checkpoint at all, pickled code
        detail = (str(e).splitlines() or [type(e).__name__])[0]
        raise InputError(where, f"not a readable Lightning checkpoint (truncated or damaged?): {detail}") from None
    if not isinstance(checkpoint, dict):
        raise InputError(where, "not a Lightning checkpoint (no dictionary inside)")
    return checkpoint


def starting_weights(path: str) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``(state dict, targets)`` of a Lightning checkpoint or an exported metric folder (verified)."""
    if is_exported(path):
        export = read_export(path)
        return export.load_weights(), list(export.meta.get("targets", []))
    checkpoint = read_checkpoint(path, label=f"init_from {path}")
    return checkpoint.get("state_dict", checkpoint), list(checkpoint.get("hyper_parameters", {}).get("targets", []))


def matching_weights(
    own: dict, state: dict, targets: list[str], old_targets: list[str], n_signals: int, source: str
) -> dict:
    """The weights of ``state`` that fit a model whose state dict is ``own``.

    Names and shapes must match, except in the head: its last layer is copied row by row for the
    targets both models share, and a head trained without the ``n_signals`` signal columns hands over
    its own columns. Target statistics are never copied: new data brings its own. ``source`` names the
    weights' origin in the error raised when no encoder weight fits.
    """
    copied = {}
    for name, value in state.items():
        if name in STATISTICS or name not in own:
            continue
        if own[name].shape == value.shape:
            copied[name] = value
        elif name.startswith("head.") and old_targets and own[name].shape[1:] == value.shape[1:]:
            rows = own[name].clone()
            for j, target in enumerate(targets):
                if target in old_targets:
                    rows[j] = value[old_targets.index(target)]
            copied[name] = rows
        elif (
            name.startswith("head.")
            and value.dim() == 2
            and own[name].shape[0] == value.shape[0]
            and own[name].shape[1] == value.shape[1] + n_signals
        ):
            columns = own[name].clone()
            columns[:, : value.shape[1]] = value
            copied[name] = columns
    if not any(k.startswith("encoder.") for k in copied):
        raise InputError(source, "no encoder weights match this model's encoder")
    return copied


def encoder_brings_weights(encoder: str, init_from: Optional[str]) -> bool:
    """Whether ``model.encoder`` loads its own weights. An exported (or imported) metric folder as the
    encoder gives only the architecture and tokenizer: its weights come with ``init_from``, which must
    then be that same folder."""
    if not is_exported(encoder):
        return True
    if init_from is None or os.path.realpath(str(init_from)) != os.path.realpath(str(encoder)):
        raise InputError(
            str(encoder),
            "an exported metric as model.encoder brings its architecture, not encoder weights of its own: "
            "give the same folder as model.init_from",
        )
    return False


def load_start(model, path: str) -> dict:
    """Load into ``model`` the weights of the checkpoint or export at ``path`` that fit it
    (:func:`matching_weights`) and return them. Weights of the source that do not fit (a head of other
    hidden sizes, say) start fresh, and a warning names them."""
    state, old_targets = starting_weights(path)
    own = model.state_dict()
    copied = matching_weights(own, state, model.targets, old_targets, model.n_signals, f"init_from {path}")
    model.load_state_dict(copied, strict=False)
    left = [k for k in state if k not in copied and k not in STATISTICS and k in own]
    if left:
        shapes = ", ".join(f"{k} {list(state[k].shape)} here {list(own[k].shape)}" for k in left[:2])
        log.warning(
            "init_from %s: %d weights do not fit this model and start fresh (%s%s); to keep them, give the "
            "model the source's hidden_sizes, layer and pooling settings (an export lists them)",
            path,
            len(left),
            shapes,
            ", ..." if len(left) > 2 else "",
        )
    return copied
