"""`generate` throughput: pairs per second with lexical signals only, and with BERTScore.

    .venv/bin/python benchmarks/generate_speed.py [--sentences 2000] [--pairs 4]

Runs on the embedded default corpus (WordNet's example sentences). Lexical-only runs use one
process (pairs/s per core) and all cores. The BERTScore run is compared with BERTScore alone
on the very same pairs, so the table shows what perturbation and lexical work add on top.
"""

from __future__ import annotations

import argparse
import time

import common  # noqa: F401 (the offline environment, before anything loads transformers)

from data_gen.pipeline import Recipe, generate
from data_gen.signals import ALL_SIGNALS, LEXICAL_SIGNALS
from data_gen.wordnet import example_sentences, load_wordnet
from lightning_metrics.baselines.bertscore import BERTScorer
from lightning_metrics.parallel import default_num_proc


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    refs = example_sentences()[: args.sentences]
    load_wordnet()
    cores = default_num_proc()
    lexical = Recipe(signals=list(LEXICAL_SIGNALS))
    generate(refs[:50], lexical, args.pairs, args.seed, progress=False)  # warm caches
    t1, cols = timed(lambda: generate(refs, lexical, args.pairs, args.seed, num_proc=1, progress=False))
    n = len(cols["mt"])
    tn, _ = timed(lambda: generate(refs, lexical, args.pairs, args.seed, num_proc=cores, progress=False))

    scorer = BERTScorer(progress=False)
    scorer.score(refs[:64], refs[:64])
    full = Recipe(signals=list(ALL_SIGNALS))
    tb, cols_b = timed(
        lambda: generate(refs, full, args.pairs, args.seed, num_proc=cores, progress=False, bertscore_scorer=scorer)
    )
    ta, _ = timed(lambda: scorer.score(cols_b["mt"], cols_b["ref"]))

    print(
        f"generate speed: {args.sentences} WordNet example sentences x {args.pairs} pairs = {n} pairs, seed "
        f"{args.seed}, {cores} cores"
    )
    print(f"{'run':<44}{'seconds':>9}{'pairs/s':>10}")
    print(f"{'lexical signals, 1 process (per core)':<44}{t1:>9.2f}{n / t1:>10.0f}")
    print(f"{f'lexical signals, {cores} processes':<44}{tn:>9.2f}{n / tn:>10.0f}")
    print(f"{'all signals incl. BERTScore':<44}{tb:>9.2f}{n / tb:>10.0f}")
    print(f"{'BERTScore alone on the same pairs':<44}{ta:>9.2f}{n / ta:>10.0f}")
    print(f"full generate / BERTScore alone: {tb / ta:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
