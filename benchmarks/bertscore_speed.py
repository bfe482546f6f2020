"""BERTScore throughput: ours against the bert-score package, same model, layer, batch size, machine.

    .venv/bin/python benchmarks/bertscore_speed.py [--pairs 2000] [--batch-size 64] [--repeats 2]

Uses a seeded sample of real (mt, ref) pairs from ../shared/data/wmt21_da_toen.csv. Model
loading is excluded for both (each scorer is built once and warmed up); the best of
``--repeats`` timed runs is reported. Prints both throughputs, their ratio and the largest
score difference (fp32 is the equal-scores row; bf16 weights are
shown for reference, with their deviation).
"""

from __future__ import annotations

import argparse
import csv
import random
import time

import common  # the offline environment, before anything loads transformers
import numpy as np
import torch

from lightning_metrics.baselines.bertscore import BERTScorer
from lightning_metrics.encoders.loading import resolve_encoder

DATA = common.DA


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default="default")
    parser.add_argument("--layer", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import bert_score

    with DATA.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    rows = random.Random(args.seed).sample(rows, args.pairs)
    cands, refs = [r["mt"] for r in rows], [r["ref"] for r in rows]

    ours = BERTScorer(args.model, layer=args.layer, batch_size=args.batch_size, progress=False)
    theirs = bert_score.BERTScorer(
        model_type=resolve_encoder(args.model),
        num_layers=ours.layer,
        batch_size=args.batch_size,
        lang="en",
        device="cpu",
    )
    ours.score(cands[:64], refs[:64])
    theirs.score(cands[:64], refs[:64])

    t_theirs, (P, R, F) = best_time(lambda: theirs.score(cands, refs), args.repeats)
    t_ours, result = best_time(lambda: ours.score(cands, refs), args.repeats)
    signature = ours.signature
    ours_bf16 = BERTScorer(args.model, layer=args.layer, batch_size=args.batch_size, precision="bf16", progress=False)
    ours_bf16.score(cands[:64], refs[:64])
    t_bf16, result_bf16 = best_time(lambda: ours_bf16.score(cands, refs), args.repeats)
    diff_bf16 = max(
        np.abs(result_bf16.f1 - F.numpy()).max(),
        np.abs(result_bf16.precision - P.numpy()).max(),
        np.abs(result_bf16.recall - R.numpy()).max(),
    )
    diff = max(
        np.abs(result.f1 - F.numpy()).max(),
        np.abs(result.precision - P.numpy()).max(),
        np.abs(result.recall - R.numpy()).max(),
    )

    print(
        f"BERTScore speed: {args.pairs} real WMT21 DA pairs, {signature}, batch {args.batch_size}, "
        f"CPU threads {torch.get_num_threads()}, best of {args.repeats}"
    )
    print(f"{'implementation':<26}{'seconds':>10}{'pairs/s':>10}{'ratio':>8}{'max |diff| PRF':>16}")
    print(
        f"{'bert-score ' + bert_score.__version__ + ' fp32':<26}{t_theirs:>10.2f}"
        f"{args.pairs / t_theirs:>10.1f}{1.0:>8.2f}{0.0:>16.1e}"
    )
    print(
        f"{'lightning-metrics fp32':<26}{t_ours:>10.2f}"
        f"{args.pairs / t_ours:>10.1f}{t_theirs / t_ours:>8.2f}{diff:>16.1e}"
    )
    print(
        f"{'lightning-metrics bf16':<26}{t_bf16:>10.2f}"
        f"{args.pairs / t_bf16:>10.1f}{t_theirs / t_bf16:>8.2f}{diff_bf16:>16.1e}"
    )


if __name__ == "__main__":
    main()
