"""bleurt-pytorch folders: ``BleurtForSequenceClassification``, BERT- or RemBERT-based.

BLEURT is a cross-encoder over ``[CLS] ref [SEP] mt [SEP]``: BERT's pooler (a dense layer and
tanh on the last layer's ``[CLS]``) and one linear output. That is our :class:`BleurtRegressor`
with ``pooling: cls``, no layer mix and one hidden layer of the encoder's width. A checkpoint
whose ``embedding_size`` differs from its ``hidden_size`` (BLEURT-20 and its distillations)
projects its embeddings up before the first layer, as RemBERT does, so it becomes a RemBERT
encoder; the others become BERT. The WordPiece vocabulary (``vocab.txt``) becomes a fast BERT
tokenizer, a SentencePiece model (``spm.model``) a DeBERTa-v2 one, as bleurt-pytorch's own
tokenizers are.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import torch

from lightning_metrics.errors import InputError
from lightning_metrics.importers.peer import PeerModel
from lightning_metrics.storage.artifact import sha256_of

CONFIG = "config.json"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
BERT_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
    "pad_token_id",
)


def is_bleurt(path: str | os.PathLike) -> bool:
    config = Path(path) / CONFIG
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "bleurt"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return False


def read_bleurt(path: str | os.PathLike) -> PeerModel:
    """The :class:`PeerModel` of a bleurt-pytorch folder (its config, weights and tokenizer files)."""
    folder = Path(path)
    config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    if int(config.get("num_labels", 1)) != 1:
        raise InputError(str(folder / CONFIG), f"num_labels {config['num_labels']}: a BLEURT regressor has 1")
    weights_path = next((folder / name for name in WEIGHT_FILES if (folder / name).is_file()), None)
    if weights_path is None:
        raise InputError(str(folder), f"no weights ({' or '.join(WEIGHT_FILES)})")
    hidden = int(config["hidden_size"])
    dropout = config.get("classifier_dropout")
    return PeerModel(
        family="BleurtRegressor",
        hparams={
            "targets": ["score"],
            "layer_mix": False,
            "pooling": "cls",
            "hidden_sizes": [hidden],
            "activation": "Tanh",
            "dropout": float(config.get("hidden_dropout_prob", 0.1) if dropout is None else dropout),
        },
        state=bleurt_state(_read_weights(weights_path), str(weights_path)),
        encoder=str(folder),
        origin={
            "peer": "bleurt-pytorch",
            "class": "BleurtForSequenceClassification",
            "file": str(weights_path),
            "sha256": sha256_of(weights_path),
        },
        write_encoder=partial(write_encoder_files, folder, config),
    )


def _read_weights(path: Path) -> dict:
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(path)
        except (SafetensorError, OSError) as e:
            raise InputError(str(path), f"not readable safetensors ({str(e).splitlines()[0]})") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - truncated, not a state dict, or pickled code
        raise InputError(str(path), f"not a readable weights file: {(str(e).splitlines() or [''])[0]}") from None
    if not isinstance(state, dict):
        raise InputError(str(path), "not a state dict")
    return state


def bleurt_state(state: dict, where: str) -> dict[str, torch.Tensor]:
    """BLEURT's weights under our names: ``bleurt.*`` to ``encoder.*`` (the embedding projection to
    RemBERT's), the pooler to the head's hidden layer and the classifier to its output layer."""
    renames = {
        "bleurt.encoder.embedding_projection.": "encoder.encoder.embedding_hidden_mapping_in.",
        "bleurt.pooler.dense.": "head.0.",
        "classifier.": "head.3.",
        "bleurt.": "encoder.",
    }
    ours, unknown = {}, []
    for name, value in state.items():
        prefix = next((p for p in renames if name.startswith(p)), None)
        if prefix is None:
            unknown.append(name)
        else:
            ours[renames[prefix] + name[len(prefix) :]] = value
    if unknown:
        raise InputError(where, f"weights this import does not know: {unknown[:3]}")
    return ours


def write_encoder_files(folder: Path, config: dict, out: str | os.PathLike) -> None:
    """A transformers config (BERT, or RemBERT when the embeddings are narrower) and a fast tokenizer."""
    from transformers import BertConfig, RemBertConfig

    values = {k: config[k] for k in BERT_KEYS if k in config}
    embedding = config.get("embedding_size")
    if embedding is not None and int(embedding) != int(config["hidden_size"]):
        encoder_config = RemBertConfig(
            **values, input_embedding_size=int(embedding), output_embedding_size=int(embedding)
        )
    else:
        encoder_config = BertConfig(**values)
    encoder_config.save_pretrained(out)
    _tokenizer(folder).save_pretrained(out)


def _tokenizer(folder: Path):
    options_path = folder / "tokenizer_config.json"
    options = json.loads(options_path.read_text(encoding="utf-8")) if options_path.is_file() else {}
    lower = options.get("do_lower_case")
    if (folder / "vocab.txt").is_file():
        from transformers import BertTokenizerFast

        return BertTokenizerFast(
            vocab=str(folder / "vocab.txt"),
            do_lower_case=True if lower is None else bool(lower),
            strip_accents=options.get("strip_accents"),
            tokenize_chinese_chars=options.get("tokenize_chinese_chars", True),
        )
    if (folder / "spm.model").is_file():
        return _sentencepiece_tokenizer(folder, bool(lower))
    raise InputError(str(folder), "no tokenizer: expected vocab.txt (WordPiece) or spm.model (SentencePiece)")


def _sentencepiece_tokenizer(folder: Path, lower: bool):
    """BLEURT-20's tokenizer: its ``spm.model`` read as DeBERTa-v2's (bleurt-pytorch's own choice), which
    transformers converts with the ``sentencepiece`` package."""
    import importlib.util
    import shutil
    import tempfile

    from transformers import DebertaV2TokenizerFast

    if importlib.util.find_spec("sentencepiece") is None:
        raise InputError(
            str(folder / "spm.model"), "reading it needs the sentencepiece package (pip install sentencepiece)"
        )
    specials = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "[UNK]", "sep_token": "[SEP]"}
    specials.update(pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]")
    with tempfile.TemporaryDirectory(prefix="lm-spm-") as only_the_model:  # not the folder's own tokenizer_config
        shutil.copy(folder / "spm.model", only_the_model)
        return DebertaV2TokenizerFast.from_pretrained(only_the_model, do_lower_case=lower, **specials)
