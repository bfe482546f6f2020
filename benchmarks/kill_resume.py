"""Kill-and-resume soak: a short real run of the default encoder, SIGKILLed at seeded random points
(between steps, during validation, halfway through a checkpoint write), resumed from last.ckpt;
prints how many resumed runs ended with the unbroken run's weights, bit for bit.

    .venv/bin/python benchmarks/kill_resume.py [--kills 20] [--seed 0] [--rows 320] [--out runs/kill_resume]
"""

from __future__ import annotations

import argparse
import csv
import random
import shutil
import time
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import torch
from fault_points import final_weights, kill_config, run_fit  # beside this script

REPO, DA = common.REPO, common.DA
BATCH, EVERY = 8, 4  # rows per batch; last.ckpt every EVERY steps


def write_rows(out: Path, rows: int) -> tuple[Path, Path]:
    with DA.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        data = [r for _, r in zip(range(rows + rows // 4), reader)]
    paths = out / "train.csv", out / "val.csv"
    for path, part in zip(paths, (data[:rows], data[rows:])):
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(part[0]))
            writer.writeheader()
            writer.writerows(part)
    return paths


def config(folder: Path, ratings, callbacks=(), plugins=None, seed: int = 0) -> Path:
    model = {
        "class_path": "lightning_metrics.models.CometEstimator",
        "init_args": {"encoder": "default", "optim": {"nr_frozen_epochs": 0.3, "keep_embeddings_frozen": True}},
    }
    data = {
        "class_path": "lightning_metrics.data.modules.RatingsDataModule",
        "init_args": {
            "train": str(ratings[0]),
            "val": str(ratings[1]),
            "batches": {"batch_size": BATCH, "max_length": 48},
        },
    }
    return kill_config(folder, model, data, every=EVERY, callbacks=callbacks, plugins=plugins, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=96, help="training rows (validation: a quarter as many more)")
    parser.add_argument("--out", default="runs/kill_resume")
    args = parser.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ratings = write_rows(out, args.rows)
    steps = 2 * -(-args.rows // BATCH)
    start = time.perf_counter()
    run_fit(config(out / "unbroken", ratings, seed=args.seed))
    reference = final_weights(out / "unbroken")
    unbroken_s = time.perf_counter() - start
    rng = random.Random(args.seed)
    rows, same = [], 0
    for k in range(args.kills):
        phase = rng.choice(["train", "val", "write"])
        if phase == "train":
            where = rng.randrange(EVERY + 1, steps)
        elif phase == "val":
            where = rng.choice([s for s in range(EVERY + 1, steps + 1) if s % (steps // 4) == 0])
        else:
            where = rng.randrange(2, steps // EVERY + 1)
        folder, flag = out / f"kill-{k:02d}", out / f"kill-{k:02d}" / "reached"
        if phase == "write":
            killed = config(
                folder,
                ratings,
                plugins=[
                    {"class_path": "fault_points.PauseMidWrite", "init_args": {"flag": str(flag), "write": where}}
                ],
                seed=args.seed,
            )
        else:
            pause = {
                "class_path": "fault_points.PauseAt",
                "init_args": {"flag": str(flag), "step": where, "phase": phase},
            }
            killed = config(folder, ratings, callbacks=[pause], seed=args.seed)
        run_fit(killed, flag=flag)
        last = folder / "ckpt" / "last.ckpt"
        from_step = torch.load(last, weights_only=True, map_location="cpu")["global_step"]
        run_fit(config(folder, ratings, seed=args.seed), ckpt=last)
        resumed = final_weights(folder)
        identical = reference.keys() == resumed.keys() and all(torch.equal(reference[n], resumed[n]) for n in reference)
        same += identical
        label = {
            "train": f"before step {where}",
            "val": f"validation after step {where}",
            "write": f"checkpoint write {where}, halfway",
        }[phase]
        rows.append((k, label, from_step, identical))
        print(
            f"kill {k:2d}: {label:<32} resumed from step {from_step:3d}: {'identical' if identical else 'DIFFERENT'}",
            flush=True,
        )
    total_s = time.perf_counter() - start
    print(
        f"\nall-MiniLM-L6-v2 estimator, {args.rows} rows, {steps} steps, last.ckpt every {EVERY} steps, seed "
        f"{args.seed}"
    )
    print("| kill | point | resumed from step | final weights |\n|---|---|---|---|")
    for k, label, from_step, identical in rows:
        print(f"| {k} | {label} | {from_step} | {'identical' if identical else 'different'} |")
    print(
        f"\n{same}/{len(rows)} resumed runs ended with the unbroken run's weights, bit for bit "
        f"(unbroken run {unbroken_s:.0f} s; soak {total_s / 60:.1f} min)"
    )
    if same != len(rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
