"""The real-data recipe: learned metrics vs BLEU, chrF and BERTScore, in and out of distribution.

    .venv/bin/python benchmarks/wmt_da.py [--steps 300] [--comet-steps 0] [--comet-epochs 1] [--lolo-steps 300]
        [--lolo-max-rows 3000]
        [--pretrained runs/bench_bleurt/pretrain.ckpt] [--out runs/wmt_da] [--bootstrap 1000]

Models (default encoder, bf16 autocast on CPU, batch 32, max 128 tokens):
- ``bleurt+pre``: BLEURT-style regressor from synthetic pre-training (``--pretrained``, made with
  ``benchmarks/bleurt_wmt.py``), ``--steps`` steps;
- ``bleurt``: the same from the plain encoder;
- ``comet``: the COMET-style estimator from the plain encoder, ``--comet-steps`` steps (0: one epoch),
  repeated ``--comet-epochs`` times, each time from the previous export with a fresh LR schedule.

Tests:
1. in distribution: ../shared/data/wmt21_da_toen.csv, 10% of documents held out (seed 0);
2. leave one language pair out: ``--lolo-model`` fine-tuned on two of is-en/ja-en/ru-en for
   ``--lolo-steps`` steps, tested on the third (every row, or whole documents up to ``--lolo-max-rows``);
3. ../shared/data/wmt21_mqm_newstest.csv zh-en: a new language pair, MQM instead of DA.

Segment Kendall tau-b with 95% bootstrap CIs (segments resampled). Writes ``results.md``,
``results.json`` and plots to ``--out``; finished stages are cached there (``*.npy``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np

from lightning_metrics.correlation import correlate_metrics
from lightning_metrics.data.base import split_by_group
from lightning_metrics.data.modules import RatingsDataModule, Split
from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.models import BleurtRegressor, CometEstimator

DA, MQM = common.DA, common.NEWS
LPS = ("is-en", "ja-en", "ru-en")
BASELINES = ("bleu", "chrf", "bertscore")


def fit(
    name: str,
    family,
    train_csv: str,
    out: Path,
    steps: int,
    seed: int,
    init_from: str | None = None,
    frozen: float = 0.3,
) -> Path:
    """Fine-tune on ``train_csv`` (10% of documents held out) for ``steps`` batches (0: one epoch), through
    ``lightning-metrics fit``; the export of the last weights. Cached by the config's digest."""
    model = {
        "optim": {"lr_encoder": 3e-5, "lr_head": 3e-4, "nr_frozen_epochs": frozen, "keep_embeddings_frozen": True},
        "init_from": init_from,
        **({"head": {"hidden_sizes": [1024, 256]}} if family is CometEstimator else {}),
    }
    data = {"train": train_csv, "split": {"fraction": 0.1}, "batches": {"batch_size": 32, "max_length": 128}}
    config = {
        "seed_everything": seed,
        "model": {"class_path": f"lightning_metrics.models.{family.__name__}", "init_args": model},
        "data": {"class_path": "lightning_metrics.data.modules.RatingsDataModule", "init_args": {**data, "seed": seed}},
        "trainer": {
            "precision": "bf16-mixed",
            "max_epochs": 1,
            "limit_train_batches": steps or None,
            "limit_val_batches": 0,
            "num_sanity_val_steps": 0,
            "enable_checkpointing": False,  # ExportBest exports the last weights
            "enable_progress_bar": False,
            "callbacks": [],
        },
    }
    export, _ = common.fit_config(config, out / "models" / f"{name}-{common.digest(config)}", f"fit {name}")
    return export


def scores_for(metric: str, rows: dict, cache_dir: Path, name: str) -> np.ndarray:
    """Segment scores of a metric spec on ``rows``, cached as ``cache_dir/NAME.npy`` (:func:`common.cached_scores`)."""
    return common.cached_scores(metric, rows, cache_dir, name, options=ScoreOptions(device="cpu", progress=True))


def write_csv(rows: dict, path: Path) -> str:
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(list(rows))
        writer.writerows(zip(*rows.values()))
    return str(path)


def table(name: str, metrics: dict[str, np.ndarray], rows: dict, bootstrap: int, seed: int) -> dict:
    """``{metric: {group: (tau, lo, hi)}}`` plus an ``avg`` column (mean of the group taus)."""
    result = correlate_metrics(
        metrics, rows["score"], rows["lp"], None, bootstrap=bootstrap, seed=seed, num_proc=os.cpu_count() or 1
    )
    out = {}
    for metric, by_group in result.items():
        out[metric] = {g: (c.seg_kendall, *c.ci.get("seg_kendall", (np.nan, np.nan))) for g, c in by_group.items()}
        if len(by_group) > 1:
            out[metric]["avg"] = (float(np.mean([c.seg_kendall for c in by_group.values()])), np.nan, np.nan)
    return out


def markdown(title: str, results: dict, n_rows: int) -> str:
    groups = list(next(iter(results.values())))
    lines = [
        f"**{title}** ({n_rows} segments; segment Kendall tau-b, 95% bootstrap CI)",
        "",
        "| metric | " + " | ".join(groups) + " |",
        "|---" * (len(groups) + 1) + "|",
    ]
    for metric, by_group in results.items():
        cells = [
            f"{t:.4f}" + (f" [{lo:.3f}, {hi:.3f}]" if np.isfinite(lo) else "")
            for t, lo, hi in (by_group[g] for g in groups)
        ]
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=300, help="fine-tuning steps of 32 rows for the BLEURT-style models"
    )
    parser.add_argument(
        "--comet-steps", type=int, default=0, help="fine-tuning steps of the COMET estimator; 0: one epoch"
    )
    parser.add_argument(
        "--comet-epochs",
        type=int,
        default=1,
        help="epochs of the estimator; each after the first restarts the LR schedule from the previous export",
    )
    parser.add_argument(
        "--lolo-model",
        default="comet",
        choices=["comet", "bleurt+pre"],
        help="the model trained without one language pair",
    )
    parser.add_argument("--lolo-steps", type=int, default=300)
    parser.add_argument(
        "--lolo-max-rows",
        type=int,
        default=3000,
        help="test on at most this many rows (whole documents) of the held-out pair; 0: all",
    )
    parser.add_argument("--pretrained", default="runs/bench_bleurt/pretrain.ckpt")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--out", default="runs/wmt_da")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stages",
        nargs="+",
        default=["dev", "lolo", "mqm"],
        choices=["dev", "lolo", "mqm"],
        help="which tests to run and report",
    )
    args = parser.parse_args()
    out = Path(args.out)
    started = time.perf_counter()
    if not Path(args.pretrained).is_file():
        raise SystemExit(
            f"{args.pretrained} missing: run benchmarks/bleurt_wmt.py first (it writes runs/bench_bleurt/pretrain.ckpt)"
        )

    # 1. in distribution: the document split RatingsDataModule makes
    dm = RatingsDataModule(train=str(DA), split=Split(fraction=0.1), seed=args.seed)
    dm.setup("fit")
    dev = dm.val_rows
    models = {
        "bleurt+pre": fit("bleurt+pre", BleurtRegressor, str(DA), out, args.steps, args.seed, args.pretrained),
        "bleurt": fit("bleurt", BleurtRegressor, str(DA), out, args.steps, args.seed),
        "comet": fit("comet", CometEstimator, str(DA), out, args.comet_steps, args.seed),
    }
    for epoch in range(
        2, args.comet_epochs + 1
    ):  # warm restarts: each further epoch starts from the last export, encoder unfrozen
        models["comet"] = fit(
            f"comet-e{epoch}",
            CometEstimator,
            str(DA),
            out,
            args.comet_steps,
            args.seed,
            str(models["comet"]),
            frozen=0.0,
        )
    names = {**{m: m for m in BASELINES}, **{k: str(v) for k, v in models.items()}}
    in_dist = {k: scores_for(v, dev, out / "scores" / "dev", k) for k, v in names.items()}
    sections = {"in distribution": (table("dev", in_dist, dev, args.bootstrap, args.seed), len(dev["mt"]))}

    # 2. leave one language pair out
    if "lolo" in args.stages:
        lolo_section(args, out, sections)
    if "mqm" in args.stages:
        mqm_section(args, out, sections, names)
    report(out, sections, args, time.perf_counter() - started, in_dist, dev)


def lolo_section(args, out: Path, sections: dict) -> None:
    full = read_rating_table(str(DA), required=("src", "mt", "ref", "score"))
    lolo: dict[str, dict] = {}
    n_lolo = 0
    for held in LPS:
        keep = [i for i, lp in enumerate(full["lp"]) if lp != held]
        test = {k: [v[i] for i, lp in enumerate(full["lp"]) if lp == held] for k, v in full.items()}
        if args.lolo_max_rows and len(test["mt"]) > args.lolo_max_rows:  # whole documents, seeded, up to the cap
            _, picked = split_by_group(test["doc_id"], args.lolo_max_rows / len(test["mt"]), args.seed)
            test = {k: [v[i] for i in picked] for k, v in test.items()}
        n_lolo += len(test["mt"])
        train_csv = write_csv({k: [v[i] for i in keep] for k, v in full.items()}, out / "data" / f"without_{held}.csv")
        family, init_from = (CometEstimator, None) if args.lolo_model == "comet" else (BleurtRegressor, args.pretrained)
        folder = fit(f"{args.lolo_model}-no-{held}", family, train_csv, out, args.lolo_steps, args.seed, init_from)
        metrics = {m: scores_for(m, test, out / "scores" / f"lolo_{held}", m) for m in BASELINES}
        unseen = f"{args.lolo_model} (unseen lp)"
        metrics[unseen] = scores_for(str(folder), test, out / "scores" / f"lolo_{held}", args.lolo_model)
        for metric, by_group in table(held, metrics, test, args.bootstrap, args.seed).items():
            lolo.setdefault(metric, {}).update(by_group)
    sections["leave one language pair out (trained on the other two)"] = (lolo, n_lolo)


def mqm_section(args, out: Path, sections: dict, names: dict) -> None:
    mqm_all = read_rating_table(str(MQM), required=("src", "mt", "ref", "score"), on_invalid="skip")
    mqm = {k: [v[i] for i, lp in enumerate(mqm_all["lp"]) if lp == "zh-en"] for k, v in mqm_all.items()}
    mqm_scores = {k: scores_for(v, mqm, out / "scores" / "mqm_zh-en", k) for k, v in names.items()}
    sections["MQM zh-en newstest (new language pair, new protocol)"] = (
        table("mqm", mqm_scores, mqm, args.bootstrap, args.seed),
        len(mqm["mt"]),
    )


def report(out: Path, sections: dict, args, elapsed: float, in_dist: dict, dev: dict) -> None:
    from lightning_metrics.evaluation.plots import kendall_bars, scatter_plots

    command = (
        f"benchmarks/wmt_da.py --steps {args.steps} --comet-steps {args.comet_steps} --comet-epochs "
        f"{args.comet_epochs} --lolo-model {args.lolo_model} "
        f"--lolo-steps {args.lolo_steps} --lolo-max-rows {args.lolo_max_rows}"
    )
    text = [f"# WMT benchmark (`{command}`)", ""]
    for title, (results, n) in sections.items():
        text += [markdown(title, results, n), ""]
    dev_avg = sections["in distribution"][0]
    best = max((m for m in dev_avg if m not in BASELINES), key=lambda m: dev_avg[m]["avg"][0])
    margin = dev_avg[best]["avg"][0] - dev_avg["chrf"]["avg"][0]
    text.append(
        f"Best learned metric in distribution: **{best}**, avg Kendall {dev_avg[best]['avg'][0]:.4f} vs chrF "
        f"{dev_avg['chrf']['avg'][0]:.4f} (margin {margin:+.4f}; target +0.05)."
    )
    for title, (results, _) in list(sections.items())[1:]:  # out of distribution: the best model's row vs chrF per test
        row = next((m for m in results if m.split(" ")[0] == best), None)
        if row is not None:
            gaps = ", ".join(
                f"{g} {results[row][g][0] - results['chrf'][g][0]:+.4f}" for g in results[row] if g != "avg"
            )
            text.append(f"{title}: {row} minus chrF: {gaps} (target > 0).")
    text.append(f"\nTotal wall time {elapsed / 60:.0f} min (cached stages excluded).")
    (out / "results.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    (out / "results.json").write_text(
        json.dumps({t: r for t, (r, _) in sections.items()}, indent=1, default=float) + "\n"
    )
    kendall_bars(
        sections["in distribution"][0], out / "plots", "Segment Kendall, WMT21 DA to-English, held-out documents"
    )
    scatter_plots(in_dist, dev["score"], dev["lp"], out / "plots")
    print("\n".join(text))


if __name__ == "__main__":
    main()
