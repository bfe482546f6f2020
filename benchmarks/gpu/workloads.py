"""The workloads of the GPU benchmark: encoders of a shape, FLOP counts, and one timing per side.

Each ``time_*`` function returns ``{"seconds", "rows", "scores"?}`` for one implementation at one
precision; the peers (unbabel-comet in its own transformers-4 environment, bert-score in ours)
run on the same encoder folder, the same metric weights and the same rows.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # benchmarks/: common.py and the CPU benchmarks

import common  # noqa: E402  (the offline environment, before anything loads transformers)
import numpy as np  # noqa: E402
import torch  # noqa: E402

from lightning_metrics.encoders.inference import attention_kernels  # noqa: E402, F401 (profile_steps restores it)

REPO = common.REPO
HEAD = [1024, 256]

# BERT shapes: all-MiniLM-L6-v2's, XLM-R-large's (24 x 1024; BERT's vocabulary, the same arithmetic
# per token), and a tiny one for the CPU dry run. ``bertscore_layer``: the layer BERTScore reads.
SHAPES = {
    "minilm": {
        "num_hidden_layers": 6,
        "hidden_size": 384,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "bertscore_layer": 4,
    },
    "large": {
        "num_hidden_layers": 24,
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "bertscore_layer": 17,
    },
    "tiny": {
        "num_hidden_layers": 2,
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "bertscore_layer": 1,
    },
}


def build_encoder(shape: str, tokenizer_dir: str, out: Path, seed: int) -> Path:
    """A BERT of ``shape`` with seeded random weights and the tokenizer of ``tokenizer_dir``, saved to ``out``."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    folder = out / f"encoder-{shape}"
    if (folder / "config.json").is_file():
        return folder
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    sizes = {k: v for k, v in SHAPES[shape].items() if k != "bertscore_layer"}
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=len(tokenizer), max_position_embeddings=512, **sizes)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def forward_flops(lengths, shape: str, layers: int | None = None) -> float:
    """Matrix FLOPs of one encoder forward over sequences of ``lengths`` tokens: per layer, the
    projections and feed-forward (2 x tokens x parameters) and attention's two products (4 x n^2 x H)."""
    s = SHAPES[shape]
    h, inter, n_layers = (
        s["hidden_size"],
        s["intermediate_size"],
        layers if layers is not None else s["num_hidden_layers"],
    )
    n = np.asarray(lengths, dtype=np.float64)
    per_layer = 2 * n.sum() * (4 * h * h + 2 * h * inter) + 4 * (n**2).sum() * h
    return float(n_layers * per_layer)


def token_lengths(tokenizer_dir: Path, sentences: list[str], max_length: int = 512) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    return [len(x) for x in tokenizer(sentences, truncation=True, max_length=max_length)["input_ids"]]


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def bf16_matmul_rate(size: int = 8192, repeats: int = 10) -> float | None:
    """Measured bf16 matrix-product FLOP/s on this GPU (None without CUDA): ``size``^3, after 3 warm-ups."""
    if not torch.cuda.is_available():
        return None
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        a @ b
    stop.record()
    torch.cuda.synchronize()
    return 2 * size**3 * repeats / (start.elapsed_time(stop) / 1000)


def write_rows(rows: list[dict], path: Path, fields=("src", "mt", "ref", "score")) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


# -- scoring -----------------------------------------------------------------------------------
def time_ours_scoring(folder: Path, rows: list[dict], precision: str, device: str) -> dict:
    from lightning_metrics import load_metric

    metric = load_metric(str(folder), precision=precision)
    columns = {k: [r[k] for r in rows] for k in ("src", "mt", "ref")}
    metric.score(**{k: v[:64] for k, v in columns.items()}, device=device, progress=False)  # warm-up, as the peer's
    synchronize()
    start = time.perf_counter()
    result = metric.score(**columns, device=device, progress=False)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rows": len(rows), "scores": np.asarray(result.scores), "signature": result.signature}


def run_peer(args: list[str], peer: dict) -> dict:
    """``benchmarks/peers/comet_peer.py ARGS`` with the peer's python and PYTHONPATH (:func:`common.run_peer`)."""
    return common.run_peer("comet_peer.py", args, peer["python"], peer.get("path"))


def time_peer_scoring(encoder: Path, weights: Path, data: Path, n_rows: int, peer: dict, gpu: bool) -> dict:
    out = run_peer(
        [
            "predict",
            "--data",
            str(data),
            "--encoder",
            str(encoder),
            "--weights",
            str(weights),
            "--batch",
            "64",
            "--accelerator",
            "gpu" if gpu else "cpu",
        ],
        peer,
    )
    return {"seconds": out["seconds"], "rows": n_rows, "scores": np.asarray(out["scores"])}


# -- BERTScore ---------------------------------------------------------------------------------
def time_ours_bertscore(
    encoder: Path, layer: int, cands: list[str], refs: list[str], precision: str, device: str
) -> dict:
    from lightning_metrics.baselines.bertscore import BERTScorer

    scorer = BERTScorer(str(encoder), layer=layer, device=device, precision=precision, progress=False)
    scorer.score(cands[:64], refs[:64])
    synchronize()
    start = time.perf_counter()
    result = scorer.score(cands, refs)
    return {"seconds": time.perf_counter() - start, "rows": len(cands), "scores": result.f1}


def time_peer_bertscore(encoder: Path, layer: int, cands: list[str], refs: list[str], device: str) -> dict:
    import bert_score

    scorer = bert_score.BERTScorer(model_type=str(encoder), num_layers=layer, batch_size=64, device=device, lang="en")
    scorer.score(cands[:64], refs[:64])
    synchronize()
    start = time.perf_counter()
    _, _, f = scorer.score(cands, refs)
    return {"seconds": time.perf_counter() - start, "rows": len(cands), "scores": f.numpy()}


# -- training ----------------------------------------------------------------------------------
def time_ours_training(encoder: Path, data: Path, n_rows: int, precision: str, gpu: bool, out: Path, seed: int) -> dict:
    """One epoch of a CometEstimator at COMET's recipe (batch 16, encoder frozen for 30%), validation off."""
    import pytorch_lightning as pl

    from lightning_metrics.data.modules import RatingsDataModule
    from lightning_metrics.models import CometEstimator

    pl.seed_everything(seed, verbose=False)
    optim = {"lr_encoder": 3e-5, "lr_head": 3e-4, "layerwise_decay": 0.9, "nr_frozen_epochs": 0.3}
    model = CometEstimator(
        encoder=str(encoder), head={"hidden_sizes": HEAD}, optim={**optim, "keep_embeddings_frozen": True}
    )
    dm = RatingsDataModule(
        train=str(data),
        val=str(data),
        encoder=str(encoder),
        batches={"batch_size": 16, "max_length": 256},
        seed=seed,
        layout=model.batch_layout,
    )
    trainer = pl.Trainer(
        default_root_dir=out,
        accelerator="gpu" if gpu else "cpu",
        devices=1,
        precision=precision,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    synchronize()
    start = time.perf_counter()
    trainer.fit(model, dm)
    synchronize()
    return {"seconds": time.perf_counter() - start, "rows": n_rows}


def time_peer_training(encoder: Path, data: Path, n_rows: int, precision: str, peer: dict, gpu: bool) -> dict:
    out = run_peer(
        [
            "train",
            "--data",
            str(data),
            "--encoder",
            str(encoder),
            "--batch",
            "16",
            "--precision",
            precision,
            "--accelerator",
            "gpu" if gpu else "cpu",
        ],
        peer,
    )
    return {"seconds": out["epoch_seconds"], "rows": n_rows}
