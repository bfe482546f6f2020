"""COMET-style estimator on real DA ratings: dev Kendall per language pair, and epoch time vs unbabel-comet.

    .venv/bin/python benchmarks/comet_wmt.py [--steps 300] [--epoch-rows 1024] [--peer-python .venv-comet/bin/python]

1. Epoch time: the first ``--epoch-rows`` rows of the document-split training set, one epoch,
   batch 32, fp32 and bf16-mixed, encoder frozen for the first 30% (both sides), validation off; ours
   (``CometEstimator``) and unbabel-comet's ``RegressionMetric`` with the same encoder folder and
   head, back to back in separate processes.
2. Quality: fine-tune the estimator on ../shared/data/wmt21_da_toen.csv (document split, 10%
   dev, the split ``benchmarks/bleurt_wmt.py`` uses) for ``--steps`` steps of 32 rows in bf16
   autocast, and report dev Kendall tau-b per language pair next to chrF and BERTScore.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import pytorch_lightning as pl
import torch

from lightning_metrics.correlation import kendall
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.encoders.loading import default_encoder_path
from lightning_metrics.metrics import score_many
from lightning_metrics.models import CometEstimator

REPO = common.REPO
DATA = common.DA
HEAD = [1024, 256]


def trainer(root: Path, precision: str, **kwargs) -> pl.Trainer:
    return pl.Trainer(
        default_root_dir=root,
        logger=pl.loggers.CSVLogger(root),
        precision=precision,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        gradient_clip_val=1.0,
        enable_checkpointing=False,
        **kwargs,
    )


def estimator(**kwargs) -> CometEstimator:
    optim = {"lr_encoder": 3e-5, "lr_head": 3e-4, "layerwise_decay": 0.9, "nr_frozen_epochs": 0.3}
    return CometEstimator(head={"hidden_sizes": HEAD}, optim={**optim, "keep_embeddings_frozen": True}, **kwargs)


def dev_predictions(model, dm: RatingsDataModule) -> np.ndarray:
    model.eval()
    out = np.zeros(len(dm.val_rows["mt"]))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        for batch in dm.val_dataloader():
            out[batch["index"].numpy()] = model.predict_scores(batch).float().numpy()
    return out


def epoch_times(args, out: Path) -> dict[str, tuple[float, float]]:
    dm = RatingsDataModule(train=str(DATA), split={"fraction": 0.1}, seed=args.seed)
    dm.setup("fit")
    subset = out / "epoch_subset.csv"
    with subset.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["src", "mt", "ref", "score"])
        for i in range(args.epoch_rows):
            writer.writerow([dm.train_rows[k][i] for k in ("src", "mt", "ref", "score")])
    print(
        f"\nEpoch over {args.epoch_rows} training rows (batch 32, {torch.get_num_threads()} CPU threads, same rows, "
        "encoder folder and head):"
    )
    print(
        "| precision | unbabel-comet RegressionMetric | lightning-metrics CometEstimator | ratio |\n|---|---|---|---|"
    )
    times = {}
    for precision in ("32-true", "bf16-mixed"):
        pl.seed_everything(args.seed)
        model = estimator()  # built outside the timer, as the peer's is
        ours_dm = RatingsDataModule(
            train=str(subset),
            val=str(subset),
            batches={"batch_size": 32, "max_length": 256},
            seed=args.seed,
            layout=model.batch_layout,
        )
        start = time.perf_counter()
        trainer(out / "epoch_ours", precision, max_epochs=1, limit_val_batches=0).fit(model, ours_dm)
        ours = time.perf_counter() - start
        peer_args = ["train", "--data", str(subset), "--encoder", str(default_encoder_path()), "--batch", "32"]
        peer = common.run_peer("comet_peer.py", [*peer_args, "--precision", precision], args.peer_python)
        peer = peer["epoch_seconds"]
        print(
            f"| {precision} | {peer:.0f} s ({args.epoch_rows / peer:.1f} rows/s) | {ours:.0f} s "
            f"({args.epoch_rows / ours:.1f} rows/s) | {peer / ours:.2f}x |",
            flush=True,
        )
        times[precision] = (ours, peer)
    return times


def quality(args, out: Path) -> None:
    pl.seed_everything(args.seed)
    model = estimator()
    dm = RatingsDataModule(
        train=str(DATA),
        split={"fraction": 0.1},
        batches={"batch_size": 32, "max_length": 128},
        seed=args.seed,
        layout=model.batch_layout,
    )
    start = time.perf_counter()
    trainer(out / "finetune", "bf16-mixed", max_epochs=1, limit_train_batches=args.steps, limit_val_batches=0).fit(
        model, dm
    )
    elapsed = time.perf_counter() - start
    results = {"comet estimator": dev_predictions(model, dm)}
    dev = dm.val_rows
    base = score_many(["chrf", "bertscore"], dev["mt"], dev["ref"], num_proc=os.cpu_count() or 1)
    results.update({"chrf": np.asarray(base["chrf"]), "bertscore": np.asarray(base["bertscore"])})
    lps, human = np.asarray(dev["lp"]), np.asarray(dev["score"])
    names = sorted(set(lps))
    print(f"\nDev split of {DATA.name}: {len(human)} rows from whole documents; segment Kendall tau-b")
    print("| metric | " + " | ".join(names) + " | avg |\n|---" * 1 + "|---" * (len(names) + 1) + "|")
    for metric, scores in results.items():
        taus = [kendall(scores[lps == n], human[lps == n]) for n in names]
        print(f"| {metric} | " + " | ".join(f"{t:.4f}" for t in taus) + f" | {np.mean(taus):.4f} |")
    print(
        f"\nfine-tuned {args.steps} steps of 32 rows in {elapsed:.0f} s (bf16 autocast, {torch.get_num_threads()} CPU "
        "threads)"
    )
    np.save(out / "dev_predictions.npy", results["comet estimator"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--epoch-rows", type=int, default=1024)
    parser.add_argument(
        "--peer-python", default=".venv-comet/bin/python", help="python of the unbabel-comet venv (make peer-venv)"
    )
    parser.add_argument("--skip-epoch", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--out", default="runs/bench_comet")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.skip_epoch:
        epoch_times(args, out)
    if not args.skip_quality:
        quality(args, out)


if __name__ == "__main__":
    main()
