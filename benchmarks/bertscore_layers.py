"""Which layer of an encoder makes the best BERTScore? Segment Kendall per layer on real DA ratings.

    .venv/bin/python benchmarks/bertscore_layers.py [--model default] [--rows 3000] [--seed 0]

Scores a seeded sample of ../shared/data/wmt21_da_toen.csv with BERTScore F1 from every layer
and prints Kendall tau-b with the human z-scores per language pair and on average. This is how
the default layer for all-MiniLM-L6-v2 in ``lightning_metrics.baselines.bertscore.DEFAULT_LAYERS`` was
chosen (the bert-score package chose its defaults the same way, on WMT16).
"""

from __future__ import annotations

import argparse

import common  # the offline environment, before anything loads transformers
import numpy as np

from lightning_metrics.baselines.bertscore import BERTScorer
from lightning_metrics.correlation import kendall
from lightning_metrics.data.readers import read_ratings
from lightning_metrics.encoders.loading import load_encoder

DATA = common.DA


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    data = read_ratings(DATA).shuffle(seed=args.seed).select(range(args.rows))
    lps, human = np.asarray(data["lp"]), np.asarray(data["score"])
    n_layers = load_encoder(args.model)[0].config.num_hidden_layers
    names = sorted(set(lps))
    print(f"BERTScore F1 per layer: {args.model}, {args.rows} sampled rows of {DATA.name}, seed {args.seed}")
    print(f"{'layer':>5}  " + "  ".join(f"{n:>7}" for n in names) + f"  {'avg':>7}")
    for layer in range(1, n_layers + 1):
        f1 = BERTScorer(args.model, layer=layer, progress=False).score(data["mt"], data["ref"]).f1
        taus = [kendall(f1[lps == n], human[lps == n]) for n in names]
        print(f"{layer:>5}  " + "  ".join(f"{t:>7.4f}" for t in taus) + f"  {np.mean(taus):>7.4f}")


if __name__ == "__main__":
    main()
