"""The exported metric folder (``checkpoints/<name>/``): the one owner of its format.

A folder of format version :data:`FORMAT_VERSION` holds

- ``metric.json``: family, hyper-parameters, inputs, target statistics, versions, training summary;
- ``model.safetensors``: every weight (loading never unpickles code);
- the encoder's ``config.json`` and the tokenizer files, so nothing is fetched to load it;
- ``README.md``, the model card;
- any further files a metric needs (a hybrid model's BERTScore encoder under ``signal_encoder/``,
  an ensemble's members under ``members/``);
- ``manifest.json``: every other file with its size and sha256.

:func:`write_export` builds the folder beside its target and renames it into place, so a
killed export leaves nothing under the target name. :func:`read_export` checks the manifest
before anything is parsed: a missing, truncated or altered file is one :class:`InputError`
naming the folder and the file. Folders of version 1 (no manifest) still load, with a warning
that they cannot be verified.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lightning_metrics.atomic import atomic_folder
from lightning_metrics.errors import InputError, LightningMetricsError

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
METADATA = "metric.json"
WEIGHTS = "model.safetensors"
MANIFEST = "manifest.json"
CARD = "README.md"
ENCODER_CONFIG = "config.json"
SIGNAL_ENCODER = "signal_encoder"  # folder: a hybrid model's BERTScore encoder
V1_FILES = (METADATA, WEIGHTS, ENCODER_CONFIG)  # what a version-1 folder (no manifest) must hold


def is_exported(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an exported metric folder (it has a metadata or a manifest file)."""
    folder = Path(str(path))
    return folder.is_dir() and ((folder / METADATA).is_file() or (folder / MANIFEST).is_file())


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest_of(folder: Path) -> dict:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder).as_posix() != MANIFEST)
    return {
        "format_version": FORMAT_VERSION,
        "files": {p.relative_to(folder).as_posix(): {"bytes": p.stat().st_size, "sha256": sha256_of(p)} for p in files},
    }


def write_export(
    target: str | os.PathLike, meta: dict, fill: Callable[[Path], None], card: str, force: bool = False
) -> Path:
    """Write an export folder atomically and return it.

    ``fill(folder)`` writes the weights, encoder config, tokenizer and any other files into the
    temporary folder; this function adds ``metric.json`` (``meta`` plus the format version), the
    model card and the manifest, then renames the folder to ``target``. The metadata's
    ``requires`` lists every file the metric needs, so a manifest that lost an entry is caught.
    """
    target = Path(target)
    if target.exists() and not force:
        raise LightningMetricsError(f"{target} exists; pass --force to replace it")
    with atomic_folder(target) as tmp:
        fill(tmp)
        requires = sorted([*(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file()), CARD])
        meta = {**meta, "format_version": FORMAT_VERSION, "requires": requires}
        (tmp / METADATA).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (tmp / CARD).write_text(card, encoding="utf-8")
        (tmp / MANIFEST).write_text(json.dumps(_manifest_of(tmp), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return target


@dataclass
class Export:
    """A verified export folder: its metadata, and the paths of its files."""

    path: Path
    meta: dict
    verified: bool
    weights_sha256: str

    @property
    def family(self) -> str:
        return str(self.meta.get("family"))

    @property
    def short_hash(self) -> str:
        """The first 10 hex digits of the weights' sha256, for signatures."""
        return self.weights_sha256[:10]

    def file(self, name: str) -> Path:
        return self.path / name

    def load_weights(self) -> dict:
        """The state dict from ``model.safetensors`` (safetensors: no code runs)."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(self.path / WEIGHTS)
        except (SafetensorError, OSError) as e:
            raise InputError(
                str(self.path), f"{WEIGHTS}: not readable safetensors ({str(e).splitlines()[0]})"
            ) from None


def read_export(path: str | os.PathLike) -> Export:
    """Open an export folder, verifying every file against its manifest (see the module docstring)."""
    folder = Path(str(path))
    if not folder.is_dir():
        raise InputError(str(folder), "no such exported metric folder")
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        listed = _verify(folder, _read_json(folder, MANIFEST))
        meta = _read_meta(folder)
        for name in meta.get("requires", ()):
            if name not in listed:
                raise InputError(str(folder), f"{name} is required by {METADATA} but not listed in {MANIFEST}")
        weights = listed.get(WEIGHTS, {}).get("sha256") or listed[METADATA]["sha256"]
        return Export(folder, meta, True, weights)
    if not (folder / METADATA).is_file():
        raise InputError(str(folder), f"not an exported metric folder (no {METADATA} and no {MANIFEST})")
    meta = _read_meta(folder)
    if meta["format_version"] >= 2:
        raise InputError(
            str(folder),
            f"{MANIFEST} is missing, so the folder cannot be verified (format version {meta['format_version']} writes "
            "one)",
        )
    for name in V1_FILES:
        if not (folder / name).is_file():
            raise InputError(str(folder), f"{name} is missing")
    log.warning(
        "%s: format version 1 has no manifest; its files cannot be verified (export it again to add one)", folder
    )
    return Export(folder, meta, False, sha256_of(folder / WEIGHTS))


def read_export_meta(path: str | os.PathLike) -> dict:
    """An export folder's ``metric.json`` alone, its files not hashed: what a metric reads, learnt before
    loading it (:func:`read_export`, which verifies every file, is the one hash check of a load)."""
    folder = Path(str(path))
    if not folder.is_dir():
        raise InputError(str(folder), "no such exported metric folder")
    if not (folder / METADATA).is_file():
        raise InputError(str(folder), f"not an exported metric folder (no {METADATA})")
    return _read_meta(folder)


def _read_meta(folder: Path) -> dict:
    meta = _read_json(folder, METADATA)
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(str(folder), f"{METADATA} has no valid format_version (got {version!r})")
    if version > FORMAT_VERSION:
        raise InputError(
            str(folder),
            f"format version {version} is newer than this code reads ({FORMAT_VERSION}); upgrade lightning-metrics",
        )
    return meta


def _read_json(folder: Path, name: str) -> dict:
    try:
        value = json.loads((folder / name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(str(folder), f"{name} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(str(folder), f"{name} is not readable JSON ({getattr(e, 'msg', None) or e})") from None
    if not isinstance(value, dict):
        raise InputError(str(folder), f"{name} does not hold a JSON object")
    return value


def _verify(folder: Path, manifest: dict) -> dict:
    """Every listed file is present with its size and sha256; the required files are listed."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(v, dict) and "sha256" in v and "bytes" in v for v in files.values()
    ):
        raise InputError(str(folder), f"{MANIFEST} does not list files with their sha256 and size")
    if METADATA not in files:
        raise InputError(str(folder), f"{MANIFEST} does not list {METADATA}")
    for name, expected in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            raise InputError(str(folder), f"{name} is missing (the manifest lists it)")
        size = path.stat().st_size
        if size != expected["bytes"]:
            raise InputError(
                str(folder),
                f"{name} is damaged: {size} bytes, the manifest says {expected['bytes']} (truncated or altered)",
            )
        if sha256_of(path) != expected["sha256"]:
            raise InputError(str(folder), f"{name} is damaged: its sha256 differs from the manifest (altered)")
    return files
