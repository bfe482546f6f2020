"""BLEURT-style regressor on real DA ratings: does synthetic pre-training help? Against chrF and BERTScore.

    .venv/bin/python benchmarks/bleurt_wmt.py [--sentences 5000] [--pairs 4] [--finetune-batches 300]
        [--out runs/bench_bleurt]
        [--pretrained runs/bench_bleurt/pretrain.ckpt]   # reuse stage 1 from an earlier run

1. ``generate`` synthetic pairs from the default corpus (WordNet examples), all signals;
2. pre-train the regressor on them (one epoch, every signal a target);
3. fine-tune on ../shared/data/wmt21_da_toen.csv (document split, 10% dev), once from the
   pre-trained weights and once from the plain encoder, with the same budget;
4. report dev Kendall tau-b per language pair for both, chrF and BERTScore on the same rows,
   and every wall time.

Training runs in bf16 autocast (this CPU has AMX); everything is seeded.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import pytorch_lightning as pl
import torch

from data_gen.pipeline import Recipe, generate, write_dataset
from data_gen.wordnet import example_sentences
from lightning_metrics.correlation import kendall
from lightning_metrics.data.modules import PRETRAIN_TARGETS, PretrainDataModule, RatingsDataModule
from lightning_metrics.metrics import score_many
from lightning_metrics.models import BleurtRegressor

DATA = common.DA


def trainer(root: Path, **kwargs) -> pl.Trainer:
    return pl.Trainer(
        default_root_dir=root,
        logger=pl.loggers.CSVLogger(root),
        precision="bf16-mixed",
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        gradient_clip_val=1.0,
        **kwargs,
    )


def dev_predictions(model: BleurtRegressor, dm: RatingsDataModule) -> np.ndarray:
    model.eval()
    out = np.zeros(len(dm.val_rows["mt"]))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        for batch in dm.val_dataloader():
            out[batch["index"].numpy()] = model.scores_from(model(batch)).float().numpy()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=5000)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--finetune-batches", type=int, default=300, help="optimizer steps of fine-tuning (batch 32)")
    parser.add_argument("--out", default="runs/bench_bleurt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pretrained", default=None, help="reuse a pre-training checkpoint from an earlier run (skips steps 1-2)"
    )
    args = parser.parse_args()
    out = Path(args.out)
    times = {}
    pretrained = Path(args.pretrained) if args.pretrained else out / "pretrain.ckpt"
    if not args.pretrained:
        pretrain(args, out, times)
    run_finetuning(args, out, times, pretrained)


def pretrain(args, out: Path, times: dict) -> None:
    start = time.perf_counter()
    columns = generate(
        example_sentences()[: args.sentences],
        Recipe(),
        args.pairs,
        args.seed,
        num_proc=os.cpu_count() or 1,
        progress=False,
    )
    write_dataset(columns, out / "synthetic", (0, 1), {"seed": args.seed})
    times["generate"] = time.perf_counter() - start
    print(f"generated {len(columns['mt'])} pairs in {times['generate']:.0f} s", flush=True)

    pl.seed_everything(args.seed)
    start = time.perf_counter()
    batches = {"batch_size": 32, "max_length": 128}
    pre_dm = PretrainDataModule(data=str(out / "synthetic"), batches=batches, seed=args.seed)
    pre = BleurtRegressor(
        targets=list(PRETRAIN_TARGETS),
        objective={"loss_weights": {"score": 2.0}},
        optim={"lr_encoder": 5e-5, "lr_head": 3e-4, "keep_embeddings_frozen": True},
    )
    t = trainer(out / "pretrain", max_epochs=1, enable_checkpointing=False)
    t.fit(pre, pre_dm)
    t.save_checkpoint(out / "pretrain.ckpt")
    times["pretrain"] = time.perf_counter() - start
    print(
        f"pre-trained on {len(pre_dm.train_rows['mt'])} pairs in {times['pretrain']:.0f} s; "
        f"synthetic dev kendall {float(t.callback_metrics['val_kendall']):.4f}",
        flush=True,
    )


def run_finetuning(args, out: Path, times: dict, pretrained: Path) -> None:
    results = {}
    for name, init in (("bleurt (pretrained)", str(pretrained)), ("bleurt (no pretraining)", None)):
        pl.seed_everything(args.seed)
        start = time.perf_counter()
        batches = {"batch_size": 32, "max_length": 128}
        dm = RatingsDataModule(train=str(DATA), split={"fraction": 0.1}, batches=batches, seed=args.seed)
        optim = {"lr_encoder": 3e-5, "lr_head": 3e-4, "nr_frozen_epochs": 0.3, "keep_embeddings_frozen": True}
        model = BleurtRegressor(init_from=init, optim=optim)
        t = trainer(
            out / name.replace(" ", "_").replace("(", "").replace(")", ""),
            max_epochs=1,
            limit_train_batches=args.finetune_batches,
            limit_val_batches=0,
            enable_checkpointing=False,
        )
        t.fit(model, dm)
        times[name] = time.perf_counter() - start
        results[name] = dev_predictions(model, dm)
        print(f"{name}: fine-tuned in {times[name]:.0f} s", flush=True)

    dev = dm.val_rows
    start = time.perf_counter()
    base = score_many(["chrf", "bertscore"], dev["mt"], dev["ref"], num_proc=os.cpu_count() or 1)
    times["chrf + bertscore"] = time.perf_counter() - start
    results.update({"chrf": np.asarray(base["chrf"]), "bertscore": np.asarray(base["bertscore"])})
    lps, human = np.asarray(dev["lp"]), np.asarray(dev["score"])
    names = sorted(set(lps))
    print(f"\nDev split of {DATA.name}: {len(human)} rows from whole documents; segment Kendall tau-b")
    print(f"{'metric':<26}" + "".join(f"{n:>9}" for n in names) + f"{'avg':>9}")
    for metric, scores in results.items():
        taus = [kendall(scores[lps == n], human[lps == n]) for n in names]
        print(f"{metric:<26}" + "".join(f"{t:>9.4f}" for t in taus) + f"{np.mean(taus):>9.4f}")
    print("\nwall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))
    print(
        f"budget: fine-tuning {args.finetune_batches} steps of 32 rows from {pretrained} or from the plain encoder; "
        f"bf16 autocast on {torch.get_num_threads()} CPU threads"
    )


if __name__ == "__main__":
    main()
