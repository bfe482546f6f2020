"""Training that survives being killed anywhere: a mid-epoch resumable loader, atomic checkpoint
writes, and one-line errors for a checkpoint that cannot be resumed from.

- :class:`ResumableLoader` is the training DataLoader of every data module. Its state is the
  sampler's epoch and the number of batches it has yielded in it; Lightning does not prefetch
  from a loader with a length, so that is the number of batches the training loop has taken.
  The data module saves that state in every checkpoint (``state_dict``) and passes it to the
  loader it builds after a resume (Lightning's own loader-state restore is skipped when the
  optimiser setup has built the loader early, as ``estimated_stepping_batches`` does). The first
  pass over that epoch then skips those batches at the index level: nothing is read or collated,
  and under DDP each rank skips in its own shard (the skip wraps the sampler Lightning installed).
- :class:`AtomicCheckpointIO` writes a checkpoint to a temporary file beside the target, fsyncs it
  and renames it over the target, so a kill mid-write leaves the previous checkpoint intact.
  ``lightning-metrics fit`` installs it unless the config names its own plugins.
- :func:`check_resume_checkpoint` reads ``--ckpt_path`` (``weights_only=True``) before fitting and
  names the file when it is missing, damaged, or written by another model family or config.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Optional

import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from torch.utils.data import DataLoader

from lightning_metrics.atomic import atomic_path
from lightning_metrics.checkpoint import read_checkpoint
from lightning_metrics.errors import InputError


class _SkipFirst:
    """A batch sampler whose next pass starts ``skip`` batches in (once); its length stays whole."""

    def __init__(self, batches, skip: int = 0):
        self.batches, self.skip = batches, skip

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        skip, self.skip = self.skip, 0
        return itertools.islice(iter(self.batches), skip, None)


class ResumableLoader(DataLoader):
    """A training DataLoader that resumes mid-epoch where it was checkpointed (see the module docstring)."""

    def __init__(self, *args: Any, resume: Optional[dict] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._skipper = _SkipFirst(super()._index_sampler)
        self._epoch, self._yielded = 0, 0
        self._resume: Optional[dict] = dict(resume) if resume else None

    @property
    def _index_sampler(self):
        skipper = self.__dict__.get("_skipper")
        return skipper if skipper is not None else super()._index_sampler

    def _sampler_epoch(self) -> int:
        return int(getattr(self.sampler, "epoch", 0) or 0)

    def __iter__(self):
        epoch, skip = self._sampler_epoch(), 0
        if self._resume is not None and int(self._resume.get("epoch", -1)) == epoch:
            batches = int(self._resume.get("batches", 0))
            skip = batches if 0 < batches < len(self) else 0
        self._resume = None
        self._skipper.skip = skip
        self._epoch, self._yielded = epoch, skip
        for batch in super().__iter__():
            self._yielded += 1
            yield batch

    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "batches": self._yielded}

    def load_state_dict(self, state_dict: dict) -> None:
        self._resume = dict(state_dict)


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
    saved = checkpoint.get("hyper_parameters") or {}
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
