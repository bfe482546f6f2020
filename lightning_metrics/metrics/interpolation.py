"""Weight-space interpolation of two exports (WiSE-FT, Wortsman et al. 2022): ``(1 - alpha) * START +
alpha * TUNED`` for every floating-point weight, written as a verified export.

The two parents must be one architecture: the same family, inputs, targets and inference settings
(training-only settings such as learning rates, losses and dropout may differ), the same weight
names and shapes, and the same encoder configuration, tokenizer and signal encoder. The target
statistics are buffers in the weights, so they are mixed too: ``alpha = 0`` scores as START and
``alpha = 1`` as TUNED (where their ``max_length`` differs, the mix reads the longer). Its
metadata records ``alpha`` and both parents' paths and weight hashes (``interpolated_from``).
:func:`average_exports` writes a uniform soup of any number of such exports (``averaged_from``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.storage.artifact import CARD, MANIFEST, METADATA, WEIGHTS, read_export, write_export

TRAINING_ONLY = ("optim", "objective", "adapters", "dropout", "mix_dropout")  # do not change a score (adapters: merged)
VOLATILE_JSON_KEYS = ("_name_or_path", "name_or_path", "transformers_version")  # where a file was saved from


def interpolate_exports(
    start: str | Path,
    tuned: str | Path,
    alpha: float,
    out: str | Path,
    force: bool = False,
    chosen_on: dict | None = None,
) -> Path:
    """Write the weight-space mix of the exports ``start`` and ``tuned`` to ``out`` (see the module docstring);
    ``chosen_on``, how alpha was chosen (the dev rule's record), goes into ``interpolated_from``."""
    if not 0.0 <= alpha <= 1.0:
        raise LightningMetricsError(f"alpha: {alpha} is not in [0, 1]")
    (first, second), (start_weights, tuned_weights) = _mixable_parents([start, tuned], "interpolated")
    record = {
        "alpha": alpha,
        "start": {"path": str(start), "weights_sha256": first.weights_sha256},
        "tuned": {"path": str(tuned), "weights_sha256": second.weights_sha256},
    }
    card = (
        f"# {Path(out).name}\n\nA weight-space interpolation made by lightning-metrics: {1 - alpha:g} x `{start}` "
        f"(weights {first.short_hash}) + {alpha:g} x `{tuned}` (weights {second.short_hash}).\n\n"
    )
    weights = mix_weights(start_weights, tuned_weights, alpha)
    return _write_mix([first, second], weights, ("interpolated_from", record, chosen_on), card, out, force)


def average_exports(folders: list, out: str | Path, force: bool = False, chosen_on: dict | None = None) -> Path:
    """A uniform model soup (Wortsman et al. 2022): the mean of every floating-point weight of the exports
    ``folders`` (one architecture, e.g. checkpoints of one run along its trajectory), written to ``out``;
    the metadata's ``averaged_from`` lists each parent's path and weight hash, and ``chosen_on``."""
    if len(folders) < 2:
        raise LightningMetricsError(f"averaging needs at least two exports, got {len(folders)}")
    parents, weights = _mixable_parents(folders, "averaged")
    mean = {  # summed in fp32, stored in the last parent's dtype; other tensors are equal in every parent
        name: (sum(w[name].float() for w in weights) / len(weights)).to(t.dtype) if t.is_floating_point() else t
        for name, t in weights[-1].items()
    }
    record = {"parents": [{"path": str(f), "weights_sha256": p.weights_sha256} for f, p in zip(folders, parents)]}
    card = (
        f"# {Path(out).name}\n\nA uniform weight average (model soup) made by lightning-metrics of "
        + ", ".join(f"`{f}` (weights {p.short_hash})" for f, p in zip(folders, parents))
        + ".\n\n"
    )
    return _write_mix(parents, mean, ("averaged_from", record, chosen_on), card, out, force)


def _mixable_parents(folders: list, verb: str) -> tuple[list, list[dict]]:
    """The exports and their state dicts, checked to be one architecture (one line naming the first two
    that are not)."""
    parents = [read_export(f) for f in folders]
    for parent in parents:
        if not parent.file(WEIGHTS).is_file():
            raise LightningMetricsError(
                f"{parent.path}: holds no {WEIGHTS} to mix "
                "(an ensemble mixes its members by export --ensemble --weights)"
            )
    weights = [p.load_weights() for p in parents]
    for folder, parent, state in zip(folders[1:], parents[1:], weights[1:]):
        problem = architecture_difference(parents[0], parent) or weights_difference(weights[0], state)
        if problem:
            raise LightningMetricsError(f"{folders[0]} and {folder} cannot be {verb}: {problem}")
    return parents, weights


def _write_mix(parents: list, weights: dict, record: tuple, card: str, out: str | Path, force: bool) -> Path:
    """The export of ``weights`` with the last parent's files and metadata, ``record`` = (key, what, chosen_on)
    added; verified as any export is when it loads."""
    from safetensors.torch import save_file

    last = parents[-1]
    meta = {k: v for k, v in last.meta.items() if k not in ("format_version", "requires")}
    lengths = [p.meta.get("max_length") for p in parents]
    if all(lengths):  # the longest input of the parents, so that none's inputs are cut shorter
        meta["max_length"] = max(lengths)
    if "target_mean" in weights:
        meta["target_mean"], meta["target_std"] = weights["target_mean"].tolist(), weights["target_std"].tolist()
    key, what, chosen_on = record
    meta[key] = {**what, **({"chosen_on": chosen_on} if chosen_on else {})}

    def fill(folder: Path) -> None:
        for path in _payload_files(last.path):
            target = folder / path.relative_to(last.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        save_file({k: v.contiguous() for k, v in weights.items()}, str(folder / WEIGHTS), metadata={"format": "pt"})

    card += "Every file is listed with its sha256 in `manifest.json` and checked when it loads.\n"
    folder = write_export(out, meta, fill, card, force=force)
    read_export(folder)
    return folder


def architecture_difference(first, second) -> str | None:
    """The first way in which two exports are not one architecture, as a phrase; ``None`` if they are."""
    for key in ("family", "inputs", "targets"):
        if first.meta.get(key) != second.meta.get(key):
            return f"their {key} differ ({first.meta.get(key)!r} and {second.meta.get(key)!r})"
    where = _first_difference(_inference_settings(first.meta), _inference_settings(second.meta), "hyper_parameters")
    if where:
        return f"{where} differs"
    names = sorted({p.relative_to(first.path).as_posix() for p in _payload_files(first.path)})
    others = sorted({p.relative_to(second.path).as_posix() for p in _payload_files(second.path)})
    if names != others:
        return f"they hold different files ({sorted(set(names) ^ set(others))[:3]})"
    for name in names:
        if _file_content(first.path / name) != _file_content(second.path / name):
            return f"their {name} differ (another encoder, tokenizer or signal encoder)"
    return None


def weights_difference(start: dict, tuned: dict) -> str | None:
    """How two state dicts cannot be mixed (names, shapes, unequal non-float tensors), or ``None``."""
    if start.keys() != tuned.keys():
        return f"their weight names differ ({sorted(set(start) ^ set(tuned))[:3]})"
    for name, b in tuned.items():
        a = start[name]
        if a.shape != b.shape:
            return f"weight {name} has shape {tuple(a.shape)} in one and {tuple(b.shape)} in the other"
        if not b.is_floating_point() and not a.equal(b):
            return f"weight {name} ({b.dtype}) differs and cannot be mixed"
    return None


def mix_weights(start: dict, tuned: dict, alpha: float) -> dict:
    """``(1 - alpha) * start + alpha * tuned`` per floating-point tensor, computed in fp32 and stored in
    the tuned tensor's dtype; other tensors are the tuned ones (equal, see :func:`weights_difference`)."""
    return {
        name: ((1.0 - alpha) * start[name].float() + alpha * b.float()).to(b.dtype) if b.is_floating_point() else b
        for name, b in tuned.items()
    }


def _inference_settings(meta: dict):
    """The hyper-parameters without the training-only ones (:data:`TRAINING_ONLY`), at any depth."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in TRAINING_ONLY}
        return value

    return strip(meta.get("hyper_parameters") or {})


def _first_difference(a, b, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    return None if a == b else f"{path} ({a!r} against {b!r})"


def _payload_files(folder: Path) -> list[Path]:
    """Every file of an export but its weights, metadata, card and manifest (written anew)."""
    skip = {WEIGHTS, METADATA, CARD, MANIFEST}
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder).as_posix() not in skip)


def _file_content(path: Path):
    """A file's bytes, or for JSON its object without the keys that only say where it was saved from."""
    data = path.read_bytes()
    if path.suffix != ".json":
        return data
    try:
        value = json.loads(data)
    except ValueError:
        return data
    return {k: v for k, v in value.items() if k not in VOLATILE_JSON_KEYS} if isinstance(value, dict) else value
