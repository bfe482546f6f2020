"""MetricX-23 and MetricX-24 folders as Hugging Face holds them (google/metricx-2X-*): ``config.json`` of
an mT5 with ``architectures: [MT5ForRegression]``, weights in safetensors (one file or shards with an
index) or ``pytorch_model.bin`` (read with ``weights_only``), and mT5's tokenizer, given with
``tokenizer`` or found beside the model.

The weights map onto :class:`~lightning_metrics.models.metricx.MetricXRegressor` (the mT5 stack under
``encoder.``; of the language-model head, the score's row alone). bfloat16 checkpoints are read as
they are and stored in fp32; scoring runs in fp32 or bf16. The version is given, or read from the folder's
name (``metricx-23``/``metricx-24``); the mode defaults to ``both`` (24), ``qe`` (a 23 QE model) or
``reference``; the export records both, and scores with the length the version was trained with.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import partial
from pathlib import Path

import torch

from lightning_metrics.encoders.template import MAX_INPUT_LENGTH, check_template
from lightning_metrics.errors import InputError
from lightning_metrics.importers.peer import PeerModel
from lightning_metrics.models.metricx import SCORE_ID

CONFIG = "config.json"
ARCHITECTURE = "MT5ForRegression"
TOKENIZER_FILES = ("spiece.model", "tokenizer.json")
TIED = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")  # the shared embedding under other names


def is_metricx(path: str | os.PathLike) -> bool:
    config = Path(path) / CONFIG
    try:
        return config.is_file() and ARCHITECTURE in json.loads(config.read_text(encoding="utf-8")).get(
            "architectures", []
        )
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return False


def read_weights(folder: Path) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Every tensor of the folder's weight files (safetensors first), and the files read."""
    from safetensors.torch import load_file

    shards = sorted(folder.glob("model*.safetensors"))
    if shards:
        state = {}
        for shard in shards:
            state.update(load_file(str(shard)))
        return state, [p.name for p in shards]
    bins = sorted(folder.glob("pytorch_model*.bin"))
    if bins:
        state = {}
        for path in bins:
            state.update(torch.load(path, map_location="cpu", weights_only=True))
        return state, [p.name for p in bins]
    raise InputError(str(folder), "no weights (model.safetensors, model-*-of-*.safetensors or pytorch_model.bin)")


def metricx_state(peer: dict[str, torch.Tensor], where: str, tied: bool) -> dict[str, torch.Tensor]:
    """A MetricX checkpoint's tensors under our names: the mT5 stack under ``encoder.``, the score's row of
    the language-model head (the shared embedding where ``tied``) as ``score_head.weight``."""
    head = "shared.weight" if tied else "lm_head.weight"
    if head not in peer or "shared.weight" not in peer:
        raise InputError(where, f"not a MetricX checkpoint: no {head}")
    state = {f"encoder.{k}": v for k, v in peer.items() if k != "lm_head.weight" and k not in TIED}
    state["score_head.weight"] = peer[head][SCORE_ID : SCORE_ID + 1].clone()
    return state


def version_and_mode(folder: Path, version: str | None, mode: str | None) -> tuple[str, str]:
    name = folder.absolute().name.lower()  # the name given (a link's own), where the version is read
    if version is None:
        found = re.search(r"metricx-(23|24)", name)
        if found is None:
            raise InputError(
                str(folder), "the MetricX version is not in the folder's name: give --metricx-version 23 or 24"
            )
        version = found.group(1)
    if mode is None:
        mode = "both" if version == "24" else "qe" if "-qe" in name else "reference"
    try:
        check_template(version, mode)
    except Exception as e:  # noqa: BLE001 - the template's one line, naming the folder
        raise InputError(str(folder), str(e)) from None
    return version, mode


def read_metricx(
    path: str | os.PathLike, tokenizer: str | None = None, version: str | None = None, mode: str | None = None
) -> PeerModel:
    """The :class:`PeerModel` of a MetricX folder (module docstring)."""
    folder = Path(path)
    config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    if int(config.get("vocab_size", 0)) <= SCORE_ID:
        raise InputError(
            str(folder / CONFIG),
            f"a vocabulary of {config.get('vocab_size')} entries holds no id {SCORE_ID} (MetricX's score)",
        )
    version, mode = version_and_mode(folder, version, mode)
    source = Path(tokenizer) if tokenizer else folder
    if not any((source / f).is_file() for f in TOKENIZER_FILES):
        raise InputError(str(source), f"no tokenizer ({' or '.join(TOKENIZER_FILES)}): give --tokenizer FOLDER (mT5's)")
    peer, files = read_weights(folder)
    tied = bool(config.get("tie_word_embeddings", True))  # the file's word, not transformers 5's forced True
    return PeerModel(
        family="MetricXRegressor",
        hparams={
            "version": version,
            "mode": mode,
            "tied_embeddings": tied,
            "targets": ["score"],
            "readout": {"layer_mix": False},
        },  # fmt: skip
        state=metricx_state(peer, str(folder), tied),
        encoder=str(folder),
        origin={
            "peer": "google-research/metricx",
            "class": ARCHITECTURE,
            "file": ", ".join(files),
            "sha256": files_sha256([folder / f for f in files]),
            "version": version,
            "mode": mode,
            "dtype": str(next(iter(peer.values())).dtype).removeprefix("torch."),
        },  # fmt: skip
        write_encoder=partial(write_mt5_files, folder, source),
        max_length=MAX_INPUT_LENGTH[version],
    )


def files_sha256(paths: list[Path]) -> str:
    """The sha256 of one weight file; of the files' own sha256s, in order, for shards."""
    from lightning_metrics.storage.artifact import sha256_of

    digests = [sha256_of(p) for p in paths]
    return digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()


def write_mt5_files(folder: Path, tokenizer: Path, out: str) -> None:
    """The mT5 config (as an encoder-decoder, without the regression head) and the tokenizer, into ``out``."""
    from transformers import AutoTokenizer, MT5Config

    config = MT5Config.from_pretrained(str(folder))
    config.architectures = ["MT5Model"]
    config.save_pretrained(out)
    AutoTokenizer.from_pretrained(str(tokenizer)).save_pretrained(out)
