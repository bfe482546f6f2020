"""Atomic writes: a file or folder appears whole at its path, or not at all.

Everything the project writes (exports, checkpoints, caches, reports, shards) is first written
to a hidden temporary name beside the target, flushed to disk, then renamed over it. A crash
leaves the old file or nothing, never half of one.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Union

from lightning_metrics.errors import LightningMetricsError

PathLike = Union[str, os.PathLike]


def temp_name(target: Path) -> Path:
    """``.<stem>.tmp-<pid><suffix>`` beside ``target``: hidden, per process, and with the target's
    suffix, so writers that pick a format by suffix (numpy, matplotlib) pick the right one."""
    return target.with_name(f".{target.stem}.tmp-{os.getpid()}{target.suffix}")


@contextmanager
def atomic_path(target: PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success it is synced and renamed to ``target``, on
    failure removed. The target's folder is created. A target that is a folder, or under a file, is
    one :class:`LightningMetricsError` naming it."""
    target = Path(target)
    if target.is_dir():
        raise LightningMetricsError(f"{target}: is a folder, but a file is written there; give a file path")
    _make_parent(target)
    tmp = temp_name(target)
    try:
        yield tmp
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(target: PathLike, text: str) -> Path:
    """Write UTF-8 text atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(target)


def write_json(target: PathLike, payload, **dumps) -> Path:
    """Write JSON (indented, newline-terminated) atomically; ``dumps`` go to :func:`json.dumps`."""
    return write_text(target, json.dumps(payload, indent=2, **dumps) + "\n")


@contextmanager
def atomic_folder(target: PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder to fill; on success it replaces ``target`` (an old folder
    is moved aside first and removed after), on failure it is removed. A target that is a file is one
    :class:`LightningMetricsError` naming it."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise LightningMetricsError(f"{target}: is a file, but a folder is written there; give a folder path")
    _make_parent(target)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if target.exists():
            old = target.parent / f".{target.name}.old-{os.getpid()}"
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _make_parent(target: Path) -> None:
    blocked = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise LightningMetricsError(f"{target}: {blocked} is a file, so nothing can be written inside it")
    target.parent.mkdir(parents=True, exist_ok=True)
