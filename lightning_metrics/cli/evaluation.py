"""`lightning-metrics evaluate` and `bertscore-baseline`: correlate metrics with human ratings, and
compute a BERTScore rescaling baseline."""

from __future__ import annotations

from typing import Optional

from jsonargparse import ArgumentParser

from lightning_metrics.cli.common import (
    MAX_LENGTH_HELP,
    SPEC_HELP,
    _add_column_flags,
    _add_device_flag,
    _add_encoder_flags,
    _columns,
    _score_options,
    _subparser,
    _write_json,
)
from lightning_metrics.parallel import default_num_proc


def _evaluate_parser() -> ArgumentParser:
    p = _subparser("Correlate metrics with the human scores of a ratings file.")
    p.add_argument(
        "--data",
        type=str,
        required=True,
        help="ratings: .csv/.tsv/.jsonl/.parquet, a saved dataset folder, or a hub name",
    )
    p.add_argument(
        "--metrics",
        type=str,
        nargs="+",
        default=["bleu", "chrf"],
        help=f"metric specs, one or more: {SPEC_HELP[len('a metric spec: ') :]}",
    )
    p.add_argument("--group", type=str, default=None, help="column to group by, e.g. lp (default: no grouping)")
    p.add_argument("--bootstrap", type=int, default=1000, help="segment resamples for 95%% CIs (0: none)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--json", type=str, default=None, help="also write the numbers to this JSON file")
    p.add_argument(
        "--plot",
        type=Optional[str],
        default=None,
        help="write scatter plots per group and a Kendall bar chart (PNG) to this folder",
    )
    p.add_argument(
        "--num-proc", type=int, default=default_num_proc(), help="processes for lexical scoring and the bootstrap"
    )
    p.add_argument("--quiet", type=bool, default=False, help="no progress bars")
    p.add_argument(
        "--darr",
        type=bool,
        default=False,
        help="add WMT's DARR Kendall (pairs of one source whose raw DA scores differ by > 25)",
    )
    p.add_argument(
        "--protocol",
        type=Optional[str],
        default=None,
        help="wmt24 or wmt23: the WMT metrics task's table (acc_eq with its ε, SPA or pairwise accuracy, "
        "significance clusters) per language pair",
    )
    p.add_argument("--resamples", type=int, default=1000, help="permutation draws for --protocol's clusters")
    p.add_argument("--max-length", type=Optional[int], default=None, help=MAX_LENGTH_HELP)
    _add_encoder_flags(p)
    _add_device_flag(p)
    _add_column_flags(p)
    return p


def run_evaluate(cfg) -> int:
    from lightning_metrics.data.readers import read_ratings
    from lightning_metrics.evaluation.evaluate import evaluate, format_table
    from lightning_metrics.metrics import metric_inputs, parse_specs

    if cfg.protocol not in (None, "wmt23", "wmt24"):
        from lightning_metrics.errors import LightningMetricsError

        raise LightningMetricsError(f"--protocol {cfg.protocol}: use wmt24 or wmt23")
    specs = parse_specs(cfg.metrics)  # every spec checked before any work
    options = _score_options(cfg)
    needs = {f for spec in specs for f in metric_inputs(spec)}  # a table without ref suits reference-free metrics
    data = read_ratings(
        cfg.data, columns=_columns(cfg), required=("mt", "score", *sorted(needs - {"mt"})), on_invalid=cfg.on_invalid
    )
    ev = evaluate(
        data,
        specs,
        group=cfg.group,
        bootstrap=cfg.bootstrap,
        seed=cfg.seed,
        source=cfg.data,
        num_proc=cfg.num_proc,
        options=options,
        max_length=cfg.max_length,
        precision=cfg.precision,
        darr=cfg.darr,
        protocol=cfg.protocol,
        resamples=cfg.resamples,
    )
    print(format_table(ev))
    if cfg.json:
        _write_json(cfg.json, ev.to_dict())
    if cfg.plot:
        from lightning_metrics.evaluation.evaluate import plot_evaluation

        print("plots: " + ", ".join(str(p) for p in plot_evaluation(ev, cfg.plot)))
    return 0


def _baseline_parser() -> ArgumentParser:
    p = _subparser("Compute a BERTScore rescaling baseline for any encoder and layer.")
    p.add_argument("--model", type=str, default="default", help="encoder: 'default', a folder or a hub name")
    p.add_argument(
        "--layer", type=Optional[int], default=None, help="layer (default: documented per model, else the last)"
    )
    p.add_argument(
        "--corpus",
        type=str,
        required=True,
        help="sentences: a text file (one per line) or a table with a ref/text column",
    )
    p.add_argument("--column", type=Optional[str], default=None, help="column of a table corpus")
    p.add_argument("--out", type=str, required=True, help="JSON file to write")
    p.add_argument("--n-pairs", type=int, default=5000, help="random pairs of different sentences")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--idf", type=bool, default=False, help="IDF-weighted baseline (IDF over the corpus)")
    _add_encoder_flags(p)
    _add_device_flag(p)
    return p


def run_baseline(cfg) -> int:
    from lightning_metrics.baselines.bertscore import BERTScorer
    from lightning_metrics.baselines.rescaling import compute_baseline
    from lightning_metrics.data.readers import read_corpus

    corpus = read_corpus(cfg.corpus, column=cfg.column)
    scorer = BERTScorer(
        cfg.model,
        layer=cfg.layer,
        idf=cfg.idf,
        idf_corpus=corpus if cfg.idf else None,
        batch_size=cfg.batch_size,
        device=_score_options(cfg).device,
        precision=cfg.precision,
    )
    baseline = compute_baseline(scorer, corpus, n_pairs=cfg.n_pairs, seed=cfg.seed)
    baseline["corpus"] = str(cfg.corpus)
    _write_json(cfg.out, baseline)
    print(
        f"{scorer.signature}  P {baseline['P']:.4f}  R {baseline['R']:.4f}  F {baseline['F']:.4f}  ({cfg.n_pairs} "
        f"pairs, seed {cfg.seed})"
    )
    return 0
