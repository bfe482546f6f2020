"""Checks of a parsed training config before LightningCLI builds anything: one line naming the
config file, the key and what is allowed, instead of a traceback from inside a constructor.

Covers the data paths (``train`` as a file or a list of rating sources, ``val``, ``data``), each
source's keys, path and weight, and the enumerated and ranged keys of the data and the model.
"""

from __future__ import annotations

import glob
import math
import zipfile
from pathlib import Path

import torch

from lightning_metrics.data.base import SAMPLERS
from lightning_metrics.data.readers import ON_INVALID
from lightning_metrics.data.sources import NORMALISATIONS, RatingSource
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.models.losses import LOSSES
from lightning_metrics.models.modules import LAYER_TRANSFORMS, POOLINGS
from lightning_metrics.storage.artifact import METADATA, is_exported

# the allowed values come from the modules that own each setting; keys are paths below init_args
DATA_CHOICES = {"ratings.normalise": NORMALISATIONS, "batches.sampler": SAMPLERS, "ratings.on_invalid": ON_INVALID}
MODEL_CHOICES = {"objective.loss": LOSSES, "readout.layer_transform": LAYER_TRANSFORMS, "readout.pooling": POOLINGS}
POSITIVE = ("batches.batch_size", "batches.max_length")  # data keys that count something: at least 1
FRACTIONS = ("split.fraction", "val_fraction")  # in (0, 1)


def check_training_config(config, where: str) -> None:
    """Raise :class:`InputError` (``where``: the config file(s)) for the first bad key of ``config``."""
    data_args = _init_args(config.get("data"))
    model_args = _init_args(config.get("model"))
    if data_args is not None:
        _check_choices(data_args, DATA_CHOICES, "data", where)
        for key in POSITIVE:
            value = _get(data_args, key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InputError(where, f"data.init_args.{key}: {value!r} is not a whole number of at least 1")
        for key in FRACTIONS:
            fraction = _get(data_args, key)
            if fraction is not None and not 0 < float(fraction) < 1:
                raise InputError(where, f"data.init_args.{key}: {fraction!r} is outside (0, 1)")
        _check_paths(data_args, where)
    if model_args is not None:
        _check_choices(model_args, MODEL_CHOICES, "model", where)
        _check_start(model_args.get("init_from"), where)
    _check_accelerator(config.get("trainer"), where)


def _init_args(section):
    args = section.get("init_args") if section is not None and hasattr(section, "get") else None
    return args.as_dict() if hasattr(args, "as_dict") else args


def _get(args: dict, path: str):
    """The value at a dotted ``path`` of nested dicts, or None."""
    for key in path.split("."):
        args = args.get(key) if isinstance(args, dict) else None
    return args


def _check_choices(args: dict, choices: dict, part: str, where: str) -> None:
    for key, allowed in choices.items():
        value = _get(args, key)
        if value is not None and value not in allowed:
            raise InputError(where, f"{part}.init_args.{key}: {value!r} is not one of {', '.join(allowed)}")


def _check_paths(args: dict, where: str) -> None:
    """Data files must exist; each rating source of a ``train`` list must be one (keys, path, weight)."""
    for key in ("val", "data"):
        _check_file(args.get(key), f"data.init_args.{key}")
    train = args.get("train")
    if not isinstance(train, (list, tuple)):
        _check_file(train, "data.init_args.train")
        return
    for i, entry in enumerate(train):
        key = f"data.init_args.train[{i}]"
        try:
            source = RatingSource.from_any(entry)
        except (LightningMetricsError, TypeError) as e:
            raise InputError(where, f"{key}: {e}") from None
        _check_file(source.path, f"{key}.path")
        if not isinstance(source.weight, (int, float)) or not math.isfinite(source.weight) or source.weight < 0:
            raise InputError(where, f"{key}.weight: {source.weight!r} is not a finite number of at least 0")


def _check_start(value, where: str) -> None:
    """``init_from`` must name a Lightning checkpoint file or an exported metric folder."""
    if not value:
        return
    path = Path(str(value)).expanduser()
    key = "model.init_args.init_from"
    if not path.exists():
        raise InputError(where, f"{key}: {value}: no such file or folder (a .ckpt from fit, or an exported metric)")
    if path.is_dir() and not is_exported(path):
        raise InputError(where, f"{key}: {value}: a folder, but not an exported metric (no {METADATA})")
    if path.is_file() and not zipfile.is_zipfile(path):
        raise InputError(where, f"{key}: {value}: not a readable Lightning checkpoint (truncated or not one at all)")


def _check_accelerator(trainer, where: str) -> None:
    """A GPU asked for on a machine without one is one line naming the key, not Lightning's traceback."""
    accelerator = str(trainer.get("accelerator") or "auto") if trainer is not None else "auto"
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise InputError(where, f"trainer.accelerator: {accelerator}: this machine has no CUDA device; use auto or cpu")


def _check_file(value, key: str) -> None:
    if isinstance(value, str) and not Path(value).exists() and not glob.glob(value):
        raise InputError(value, f"data file not found ({key})")


def moved_key_problem(argv: list[str]) -> str | None:
    """The one line for a model or data key that an earlier version took flat and that now lives in a
    group (``model.init_args.lr_encoder`` is ``model.init_args.optim.lr_encoder``), in a ``--config``
    file or on the command line; else None. jsonargparse would only say the key is not expected."""
    import yaml

    files = [b for a, b in zip(argv, argv[1:]) if a == "--config"] + [
        a.split("=", 1)[1] for a in argv if a.startswith("--config=")
    ]
    configs = []
    for path in files:
        try:
            config = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # reported elsewhere
        configs.append((path, config if isinstance(config, dict) else {}))
    classes = {part: (c.get(part) or {}).get("class_path") for _, c in configs for part in ("model", "data")
               if isinstance(c.get(part), dict) and c[part].get("class_path")}  # fmt: skip
    for path, config in configs:
        for part in ("model", "data"):
            section = config.get(part)
            args = section.get("init_args") if isinstance(section, dict) else None
            for key in args if isinstance(args, dict) else ():
                problem = _moved(part, key, classes.get(part))
                if problem:
                    return f"{path}: {problem}"
    for flag in argv:
        key = flag[2:].split("=", 1)[0] if flag.startswith("--") else ""
        part, _, rest = key.partition(".init_args.")
        problem = _moved(part, rest.split(".")[0], classes.get(part)) if rest else None
        if problem:
            return f"the command line: {problem}"
    return None


def _moved(part: str, key: str, class_path) -> str | None:
    from lightning_metrics.data.modules import MOVED as DATA_MOVED
    from lightning_metrics.models.options import MOVED as MODEL_MOVED

    table = MODEL_MOVED if part == "model" else DATA_MOVED if part == "data" else {}
    if key not in table or (key == "signals" and part == "model"):
        return None
    if part == "data" and key == "val_fraction" and str(class_path or "").endswith("PretrainDataModule"):
        return None  # the pre-training data module keeps its flat val_fraction
    return (
        f"{part}.init_args.{key} is now {part}.init_args.{table[key]} (settings come in groups; see docs/training.md)"
    )
