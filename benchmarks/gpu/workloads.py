"""What the GPU benchmark measures on: encoders of a shape with seeded random weights, FLOP counts of
the useful work, the device's measured and rated bf16 rates, the two row layouts, and the summary of
repeated timings (median, min, max). The timings themselves are in :mod:`sides`.
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # benchmarks/: common.py and the CPU benchmarks

import common  # noqa: E402  (the offline environment, before anything loads transformers)
import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO = common.REPO

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


# the vendor's dense bf16 tensor rate (TFLOP/s, without sparsity), by a part of the device's name
RATED_BF16_TFLOPS = {"H200": 989.0, "H100 PCIe": 756.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0}


def rated_bf16_tflops(device_name: str) -> float | None:
    """The rated dense bf16 peak of a device, matched by name (the longest match), else None."""
    found = [k for k in RATED_BF16_TFLOPS if k in device_name]
    return RATED_BF16_TFLOPS[max(found, key=len)] if found else None


def read_rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def layout_rows(rows: list[dict], layout: str, n: int) -> list[dict]:
    """``n`` rows in a layout: ``wmt``, whole sources with every system's output (sources and references
    repeat, as in a WMT table), or ``distinct``, one output per source (nothing repeats)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r.get("lp"), r["src"]), []).append(r)
    if layout == "distinct":
        return [group[0] for group in groups.values()][:n]
    out: list[dict] = []
    for group in groups.values():
        out += group[: n - len(out)]
        if len(out) >= n:
            break
    return out


def summary(runs: list[float]) -> dict:
    """The median of repeated timings, with the min and max."""
    return {"seconds": statistics.median(runs), "min": min(runs), "max": max(runs), "runs": list(runs)}
