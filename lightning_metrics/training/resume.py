"""Training that survives being killed anywhere: atomic checkpoint writes, and one-line errors for
a checkpoint that cannot be resumed from (the mid-epoch resumable loader is
:class:`lightning_metrics.data.loader.ResumableLoader`).

- :class:`AtomicCheckpointIO` writes a checkpoint to a temporary file beside the target, fsyncs it
  and renames it over the target, so a kill mid-write leaves the previous checkpoint intact.
  ``lightning-metrics fit`` installs it unless the config names its own plugins.
- :func:`check_resume_checkpoint` reads ``--ckpt_path`` (``weights_only=True``) before fitting and
  names the file when it is missing, damaged, or written by another model family or config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

from lightning_metrics.atomic import atomic_path
from lightning_metrics.errors import InputError
from lightning_metrics.models.options import grouped
from lightning_metrics.storage.checkpoint import read_checkpoint


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` to ``.<name>.tmp-<pid>`` beside the target, fsync, then ``os.replace``."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options: Optional[Any] = None) -> None:
        if "://" in str(path):  # remote storage: Lightning's own (fsspec transaction) writer
            return super().save_checkpoint(checkpoint, path, storage_options)
        with atomic_path(path) as tmp, tmp.open("wb") as f:
            self._write(checkpoint, f)

    def _write(self, checkpoint: dict, f) -> None:
        torch.save(checkpoint, f)


def check_resume_checkpoint(path: str, model_class_path: Optional[str], model_args: dict) -> None:
    """One-line :class:`InputError` naming ``path`` unless it is a readable checkpoint of this model
    family (``model_class_path``; None: any) and config (``model_args``; the keys it shares with the
    checkpoint's hyper-parameters, None values skipped)."""
    if path in ("last", "best", "hpc", "registry") or "://" in path:
        return  # Lightning resolves these itself
    file = Path(path)
    if not file.is_file():
        raise InputError(path, "checkpoint file not found (--ckpt_path)")
    checkpoint = read_checkpoint(file, label=path, mmap=True)
    if "state_dict" not in checkpoint or "loops" not in checkpoint:
        raise InputError(path, "not a Lightning training checkpoint (no state_dict/loops): cannot resume from it")
    saved = grouped(checkpoint.get("hyper_parameters") or {})
    family = saved.get("_class_path")
    name = lambda class_path: class_path.rsplit(".", 1)[-1]  # noqa: E731 - jsonargparse may spell the module either way
    if family and model_class_path and name(family) != name(model_class_path):
        raise InputError(path, f"checkpoint of {name(family)}, but the config trains {name(model_class_path)}")
    differ = sorted(k for k, v in model_args.items() if v is not None and k in saved and _plain(saved[k]) != _plain(v))
    if differ:
        detail = ", ".join(f"{k}: {saved[k]!r} in the checkpoint, {model_args[k]!r} in the config" for k in differ[:3])
        raise InputError(path, f"checkpoint was trained with another model config ({detail})")


def _plain(value):
    """Tuples and lists compare equal (YAML gives lists, hparams may hold tuples)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
