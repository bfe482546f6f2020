"""Checks of a parsed training config before LightningCLI builds anything: one line naming the
config file, the key and what is allowed, instead of a traceback from inside a constructor.

Covers the data paths (``train`` as a file or a list of rating sources, ``val``, ``data``), each
source's keys, path and weight, and the enumerated and ranged keys of the data and the model.
"""

from __future__ import annotations

import glob
import math
from pathlib import Path

from lightning_metrics.data.base import SAMPLERS
from lightning_metrics.data.readers import ON_INVALID
from lightning_metrics.data.sources import NORMALISATIONS, RatingSource
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.models.losses import LOSSES
from lightning_metrics.models.modules import LAYER_TRANSFORMS, POOLINGS

# the allowed values come from the modules that own each setting
DATA_CHOICES = {"normalise": NORMALISATIONS, "sampler": SAMPLERS, "on_invalid": ON_INVALID}
MODEL_CHOICES = {"loss": LOSSES, "layer_transform": LAYER_TRANSFORMS, "pooling": POOLINGS}
POSITIVE = ("batch_size", "max_length")  # data keys that count something: at least 1


def check_training_config(config, where: str) -> None:
    """Raise :class:`InputError` (``where``: the config file(s)) for the first bad key of ``config``."""
    data_args = _init_args(config.get("data"))
    model_args = _init_args(config.get("model"))
    if data_args is not None:
        _check_choices(data_args, DATA_CHOICES, "data", where)
        for key in POSITIVE:
            value = data_args.get(key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InputError(where, f"data.init_args.{key}: {value!r} is not a whole number of at least 1")
        fraction = data_args.get("val_fraction")
        if fraction is not None and not 0 < float(fraction) < 1:
            raise InputError(where, f"data.init_args.val_fraction: {fraction!r} is outside (0, 1)")
        _check_paths(data_args, where)
    if model_args is not None:
        _check_choices(model_args, MODEL_CHOICES, "model", where)


def _init_args(section):
    args = section.get("init_args") if section is not None and hasattr(section, "get") else None
    return args.as_dict() if hasattr(args, "as_dict") else args


def _check_choices(args: dict, choices: dict, part: str, where: str) -> None:
    for key, allowed in choices.items():
        value = args.get(key)
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


def _check_file(value, key: str) -> None:
    if isinstance(value, str) and not Path(value).exists() and not glob.glob(value):
        raise InputError(value, f"data file not found ({key})")
