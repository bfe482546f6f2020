"""MBR reranking time per source against ``comet-mbr``, same architecture and weights, N = 8 and 32.

    .venv/bin/python benchmarks/rerank_speed.py [--sources 64] [--sizes 8 32] [--batch 64]
        [--peer-python .venv-comet/bin/python]

1. Build the seeded ``CometEstimator`` of ``score_speed.py`` (default encoder, [1024, 256] head),
   exported, and the same weights under COMET's parameter names.
2. Candidates: the first ``--sources`` zh-en sources of ../shared/data/wmt21_mqm_newstest.csv,
   each with its 8 real system outputs (N = 8); for N = 32 each output also gets 3 seeded
   ``data_gen`` perturbations (deletion, substitution, reordering...): 32 distinct-ish candidates.
3. ``lightning-metrics``' ``rerank(mode="mbr")`` and ``comet-mbr``'s own ``build_embeddings`` +
   ``mbr_decoding`` (unbabel-comet, its venv) choose a candidate per source: each candidate scored
   against the other N-1 as pseudo-references, utility = their mean.
4. Report seconds per source for both, the ratio, the largest utility difference and how many
   choices agree. Model loading is excluded on both sides; our side is warmed up on 64 rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from score_speed import build_metric

REPO = common.REPO
DATA = common.NEWS


def candidates(n_sources: int, n: int, seed: int) -> tuple[list[str], list[list[str]]]:
    """Sources and their ``n`` candidates: the 8 real outputs, then seeded perturbations of them."""
    from data_gen.pipeline import Recipe, perturb_sentence

    groups: dict[str, list[str]] = {}
    with DATA.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["lp"] == "zh-en" and row["mt"].strip():
                groups.setdefault(row["src"], []).append(row["mt"])
    sources = [s for s, g in groups.items() if len(g) >= 8][:n_sources]
    recipe = Recipe(signals=[])
    out = []
    for s_index, src in enumerate(sources):
        real = groups[src][:8]
        group, k = real[:n], 0
        while len(group) < n:
            rows = perturb_sentence(s_index * 1000 + k, real[k % len(real)], recipe, seed, 1, real)
            group += [r["mt"] for r in rows]
            k += 1
        out.append(group)
    return sources, out


def run_ours(
    folder: Path, sources: list[str], groups: list[list[str]], batch: int
) -> tuple[float, np.ndarray, list[int]]:
    from lightning_metrics import load_metric
    from lightning_metrics.encoders.inference import ScoreOptions
    from lightning_metrics.metrics.rerank import rerank

    metric = load_metric(str(folder))
    metric.score(
        mt=groups[0] * 8, ref=groups[1] * 8, src=sources[:1] * len(groups[0]) * 8, batch_size=batch, progress=False
    )  # warm-up
    start = time.perf_counter()
    choices = rerank(metric, groups, src=sources, mode="mbr", options=ScoreOptions(batch_size=batch, progress=False))
    seconds = time.perf_counter() - start
    return seconds, np.asarray([c.score for c in choices]), [c.index for c in choices]


def run_peer(python: str, task: Path, weights: Path, batch: int) -> tuple[float, np.ndarray, list[int]]:
    from lightning_metrics.encoders.loading import default_encoder_path

    args = ["mbr", "--data", str(task), "--encoder", str(default_encoder_path()), "--weights", str(weights)]
    result = common.run_peer("comet_peer.py", [*args, "--batch", str(batch)], python)
    return result["seconds"], np.asarray(result["utility"]).max(axis=1), result["chosen"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=64)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--peer-python", default=".venv-comet/bin/python", help="python of the unbabel-comet venv (make peer-venv)"
    )
    parser.add_argument("--out", default="runs/bench_rerank")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    folder = build_metric(out, args.seed)
    print(
        "| N | sources | pairs scored | unique candidates | comet-mbr s/source | lightning-metrics s/source | ratio | "
        "max abs utility diff | same choice |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        sources, groups = candidates(args.sources, n, args.seed)
        task = out / f"mbr-{n}.json"
        task.write_text(json.dumps({"src": sources, "candidates": groups}), encoding="utf-8")
        peer_s, peer_best, peer_chosen = run_peer(args.peer_python, task, out / "comet.safetensors", args.batch)
        ours_s, ours_best, ours_chosen = run_ours(folder, sources, groups, args.batch)
        same = sum(a == b for a, b in zip(peer_chosen, ours_chosen))
        unique = sum(len(set(g)) for g in groups)
        print(
            f"| {n} | {len(groups)} | {len(groups) * n * (n - 1)} | {unique} | {peer_s / len(groups):.3f} | "
            f"{ours_s / len(groups):.3f} | "
            f"{peer_s / ours_s:.2f}x | {np.abs(peer_best - ours_best).max():.2e} | {same}/{len(groups)} |",
            flush=True,
        )
    print(f"\nbatch {args.batch}, fp32, {torch.get_num_threads()} CPU threads; model load excluded on both sides")


if __name__ == "__main__":
    main()
