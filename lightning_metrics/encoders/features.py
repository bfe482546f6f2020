"""Cached encoder features: each distinct sentence's pooled vector at every layer, computed once.

When a fit never trains the encoder, what the head reads from a sentence is fixed except for the layer
mix's weights. Average (or CLS) pooling commutes with the mix, so the pooled vector of every layer
(``[layers, hidden]``) and each layer's mean and variance over the sentence's tokens (for the mix's
``layer_norm``) are all a fit needs: :meth:`~lightning_metrics.models.modules.LayerMix.mix_pooled`
mixes them as the mix would have mixed the token states.

The cache lives in ``features/<key>/`` of the cache folder (:mod:`~lightning_metrics.storage.cache`).
The key is a digest of the encoder's weights, the tokenizer (vocabulary and normalisation),
``max_length`` and the pooling; each sentence is found in it by the SHA-1 of its text. A folder holds
safetensors shards (``pooled`` [n, layers, hidden] and ``moments`` [n, layers, 2] in fp32, the texts'
digests in the metadata), written atomically. So the cache is shared by every fit and seed on the same
encoder, a changed key is a new folder, and a shard that does not read back is named in one warning,
removed, and its sentences encoded again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Callable, Sequence

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from lightning_metrics.atomic import atomic_path, write_json
from lightning_metrics.encoders.inference import attention_kernels, length_batches
from lightning_metrics.encoders.sequences import pad_sequences
from lightning_metrics.storage.cache import cache_dir

log = logging.getLogger(__name__)

FORMAT = 1
SHARD_ROWS = 4096
CACHEABLE_POOLINGS = ("avg", "cls")  # linear in the token states: pooling commutes with the layer mix
BATCH_TOKENS = 16384


def text_digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def encoder_digest(encoder: torch.nn.Module) -> str:
    """SHA-256 over every tensor of the encoder's state (names, dtypes, shapes and values)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(encoder.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def tokenizer_digest(tokenizer) -> str:
    """SHA-256 of what decides a tokenizer's ids: its class, vocabulary, special tokens and, for a fast
    tokenizer, its normaliser, pre-tokeniser and model (not the truncation a call last set)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None), spec.pop("padding", None)
    else:
        spec = sorted(tokenizer.get_vocab().items())
    payload = [type(tokenizer).__name__, spec, list(tokenizer.all_special_tokens)]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def cache_key(encoder: torch.nn.Module, tokenizer, max_length: int, pooling: str) -> dict:
    return {
        "format": FORMAT,
        "encoder": encoder_digest(encoder),
        "tokenizer": tokenizer_digest(tokenizer),
        "max_length": int(max_length),
        "pooling": pooling,
    }


class FeatureTable:
    """The features of a set of sentences in memory, looked up by text."""

    def __init__(self, pooled: torch.Tensor, moments: torch.Tensor, digests: Sequence[str]):
        self.pooled, self.moments = pooled, moments
        self.row = {d: i for i, d in enumerate(digests)}

    def __len__(self) -> int:
        return len(self.row)

    def lookup(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """``pooled`` [n, layers, hidden] and ``moments`` [n, layers, 2] of ``texts``, in their order."""
        rows = torch.tensor([self.row[text_digest(t)] for t in texts], dtype=torch.long)
        return self.pooled[rows], self.moments[rows]


class FeatureCache:
    """One key's folder of shards."""

    def __init__(self, key: dict, root: Path | None = None):
        self.key = key
        name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
        self.folder = Path(root or cache_dir("features")) / name
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / "key.json").exists():
            write_json(self.folder / "key.json", key)

    def shards(self) -> list[Path]:
        return sorted(self.folder.glob("shard-*.safetensors"))

    def stored(self) -> dict[Path, list[str]]:
        """Each readable shard's text digests; an unreadable one is named in one warning and removed."""
        out = {}
        for shard in self.shards():
            try:
                with safe_open(str(shard), framework="pt") as f:
                    digests = json.loads(f.metadata()["texts"])
                    shapes = f.get_slice("pooled").get_shape(), f.get_slice("moments").get_shape()
                if shapes[0][0] != len(digests) or shapes[1][0] != len(digests):
                    raise ValueError(f"{shapes[0][0]} rows for {len(digests)} texts")
                out[shard] = digests
            except Exception as e:  # noqa: BLE001 - any failure to read back means the shard is rebuilt
                log.warning("feature cache: %s is unreadable (%s); removed, its sentences are encoded again", shard, e)
                shard.unlink(missing_ok=True)
        return out

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The distinct ``texts`` not stored yet, in order."""
        have = {d for digests in self.stored().values() for d in digests}
        return list({text_digest(t): t for t in texts if text_digest(t) not in have}.values())

    def build(
        self,
        texts: Sequence[str],
        encode: Callable[[list[str]], tuple[torch.Tensor, torch.Tensor]],
        rank: int = 0,
        world: int = 1,
    ) -> int:
        """Encodes the distinct ``texts`` not yet stored (``encode(texts) -> (pooled, moments)``), in
        shards of :data:`SHARD_ROWS`; with ``world`` processes, process ``rank`` encodes every
        ``world``-th of them. Returns how many this process encoded."""
        missing = self.missing(texts)[rank::world]
        for first in range(0, len(missing), SHARD_ROWS):
            part = missing[first : first + SHARD_ROWS]
            pooled, moments = encode(part)
            name = f"shard-{text_digest(''.join(part))[:16]}.safetensors"  # what it holds names it
            with atomic_path(self.folder / name) as tmp:
                save_file(
                    {"pooled": pooled.float().contiguous(), "moments": moments.float().contiguous()},
                    str(tmp),
                    metadata={"texts": json.dumps([text_digest(t) for t in part]), "format": str(FORMAT)},
                )
        return len(missing)

    def table(self, texts: Sequence[str]) -> FeatureTable:
        """The stored features of ``texts`` (every one must be stored: :meth:`build` first)."""
        wanted = {text_digest(t) for t in texts}
        pooled, moments, digests = [], [], []
        for shard, names in self.stored().items():
            keep = [i for i, d in enumerate(names) if d in wanted]
            if not keep:
                continue
            with safe_open(str(shard), framework="pt") as f:
                index = torch.tensor(keep, dtype=torch.long)
                pooled.append(f.get_tensor("pooled")[index])
                moments.append(f.get_tensor("moments")[index])
            digests += [names[i] for i in keep]
        missing = len(wanted - set(digests))
        if missing:
            raise RuntimeError(f"feature cache {self.folder}: {missing} sentence(s) not stored; build them first")
        return FeatureTable(torch.cat(pooled), torch.cat(moments), digests)


@torch.no_grad()
def pooled_layer_features(
    encoder: torch.nn.Module, tokenizer, texts: list[str], max_length: int, pooling: str, progress=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every layer's pooled vector of each text (``[n, layers, hidden]``, fp32) and each layer's mean
    and variance over the text's tokens and features together (``[n, layers, 2]``), with the encoder in
    eval mode, in length-sorted batches."""
    was_training = encoder.training
    encoder.eval()
    device = next(encoder.parameters()).device
    ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    pooled, moments = [None] * len(texts), [None] * len(texts)
    try:
        for batch in length_batches([len(x) for x in ids], 256, BATCH_TOKENS):
            inputs = {k: v.to(device) for k, v in pad_sequences(tokenizer, [ids[i] for i in batch]).items()}
            with attention_kernels():
                states = encoder(**inputs, output_hidden_states=True).hidden_states
            p, m = layer_statistics(torch.stack(states).float(), inputs["attention_mask"], pooling)
            for k, i in enumerate(batch.tolist()):
                pooled[i], moments[i] = p[k].cpu(), m[k].cpu()
            if progress is not None:
                progress.update(len(batch))
    finally:
        encoder.train(was_training)
    return torch.stack(pooled), torch.stack(moments)


def layer_statistics(layers: torch.Tensor, attention_mask: torch.Tensor, pooling: str):
    """From ``[L, B, T, H]`` token states: pooled ``[B, L, H]`` and ``[B, L, 2]`` (mean, variance over
    the unmasked tokens and all features, as the layer mix's ``layer_norm`` computes them)."""
    mask = attention_mask.to(layers.dtype)[None, :, :, None]
    if pooling == "cls":
        pooled = layers[:, :, 0]
    else:
        pooled = (layers * mask).sum(dim=2) / mask.sum(dim=2).clamp_min(1.0)
    count = mask.sum(dim=(2, 3), keepdim=True) * layers.shape[-1]
    mean = (layers * mask).sum(dim=(2, 3), keepdim=True) / count
    variance = (((layers * mask - mean) * mask) ** 2).sum(dim=(2, 3), keepdim=True) / count
    moments = torch.stack([mean.flatten(1), variance.flatten(1)], dim=-1)  # [L, B, 2]
    return pooled.transpose(0, 1), moments.transpose(0, 1)
