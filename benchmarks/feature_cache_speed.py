"""Fit speed with cached encoder features, against the same frozen fit that runs the encoder.

    .venv/bin/python benchmarks/feature_cache_speed.py [--rows 4000] [--epochs 6] [--seed 0] [--repeats 3]
        [--out runs/feature_cache_speed]

The model is the multilingual recipe (``configs/recipes/generalist-multilingual.yaml``: multilingual-e5-small,
hybrid signals on MiniLM) with the encoder frozen throughout (``optim.trainable: [layer_mix, head]``),
on whole WMT21 DA documents (``--rows`` training rows, about 600 validation rows of other documents),
for ``--epochs`` epochs with a validation after each. Three fits, each timed around ``Trainer.fit``
alone (building the model and reading the data are outside the timed region, the same for all):

- **uncached**: ``readout.cached_features: false``, the encoder run on every batch;
- **cached, cold**: the feature cache emptied first, so the fit encodes every distinct sentence once;
- **cached, warm**: the cache as the cold fit left it (every later fit and seed on this encoder).

The three fits run ``--repeats`` times in that order (the cold one empties the cache each time); the
table gives each fit's median seconds and the speed-up as the ratio of medians, with every repeat's
seconds beside it. All start from the same seed; the report gives the largest difference between the uncached
fit's exported scores and each cached fit's on the validation rows (equal within 1e-5 is the claim).
Both sides read the signals from one warmed signal cache. Writes ``report.json`` and
``docs/results/feature-cache.json`` with ``feature-cache.md`` beside it (its table generated from the JSON).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import time
from datetime import date
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import pytorch_lightning as pl
import yaml
from cross_year import document_sample
from results_doc import machine, publish

from lightning_metrics.correlation import kendall
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.encoders.features import FeatureCache, cache_key
from lightning_metrics.metrics import load_metric
from lightning_metrics.models import CometEstimator
from lightning_metrics.training.export import export_checkpoint

REPO = common.REPO
RECIPE = REPO / "configs" / "recipes" / "generalist-multilingual.yaml"
RUNS = ("uncached", "cached, cold", "cached, warm")


def write_data(out: Path, rows: int, seed: int) -> tuple[Path, Path]:
    table = read_rating_table(str(common.DA), required=("src", "mt", "ref", "score"))
    train = document_sample(table, rows, seed)
    rest_docs = set(table["doc_id"]) - set(train["doc_id"])
    rest = {k: [v for v, d in zip(values, table["doc_id"]) if d in rest_docs] for k, values in table.items()}
    val = document_sample(rest, 600, seed)
    paths = []
    for name, part in (("train", train), ("val", val)):
        path = out / f"{name}.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(list(part))
            writer.writerows(zip(*part.values()))
        paths.append(path)
    return paths[0], paths[1]


def build(recipe: dict, cached: bool, train: Path, val: Path, seed: int):
    model_args = dict(recipe["model"]["init_args"])
    model_args["optim"] = {**model_args["optim"], "trainable": ["layer_mix", "head"], "nr_frozen_epochs": 0.0}
    model_args["readout"] = {**model_args.get("readout", {}), "cached_features": cached}
    pl.seed_everything(seed)
    model = CometEstimator(**model_args)
    batches = {**recipe["data"]["init_args"]["batches"], "num_workers": 0}
    data = RatingsDataModule(
        train=str(train), val=str(val), encoder=model_args["encoder"], batches=batches, seed=seed,
        signals=model_args["signals"], ratings={"weight_by": "annotators"}, layout=model.batch_layout,
    )  # fmt: skip
    return model, data


def timed_fit(recipe: dict, cached: bool, paths, epochs: int, seed: int, folder: Path) -> tuple[float, Path]:
    model, data = build(recipe, cached, *paths, seed)
    trainer = pl.Trainer(
        max_epochs=epochs, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu", gradient_clip_val=1.0,
    )  # fmt: skip
    start = time.perf_counter()
    trainer.fit(model, data)
    seconds = time.perf_counter() - start
    trainer.save_checkpoint(folder / "last.ckpt")
    export = export_checkpoint(folder / "last.ckpt", folder / "export", force=True)
    (folder / "last.ckpt").unlink()
    return seconds, export


def report_table(report: dict) -> str:
    base = report["runs"]["uncached"]["seconds"]
    lines = [
        "| fit | seconds (median) | each repeat | speed-up | largest score difference to uncached | val Kendall |",
        "|---|---|---|---|---|---|",
    ]
    for name in RUNS:
        run = report["runs"][name]
        each = ", ".join(f"{t:.1f}" for t in run.get("repeats", [run["seconds"]]))
        lines.append(
            f"| {name} | {run['seconds']:.1f} | {each} | {base / run['seconds']:.1f}x | {run['max_abs_diff']:.1e} | "
            f"{run['kendall']:.4f} |"
        )
    return "\n".join(lines)


def render(report: dict) -> str:
    """The page ``docs/results/feature-cache.md``, from its JSON."""
    return f"""# Cached encoder features: fit speed ({report["date"]})

Measured on {report["machine"]}, fp32, seed {report["seed"]}:

```bash
{report["command"]}
```

The multilingual recipe with its encoder frozen, {report["train_rows"]} WMT21 DA training rows (whole
documents), {report["val_rows"]} validation rows, {report["epochs"]} epochs ({report["steps"]} steps) with a
validation after each; {report["distinct_sentences"]} distinct sentences. Seconds are `Trainer.fit` alone.
The cold fit encodes every distinct sentence once; the warm one (every later fit or seed on this encoder)
reads them all back.

{report_table(report)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="times the three fits run; seconds are medians")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "feature_cache_speed")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    recipe = yaml.safe_load(RECIPE.read_text())
    paths = write_data(args.out, args.rows, args.seed)
    model, data = build(recipe, True, *paths, args.seed)  # warm-up: the encoder's files and the signal cache
    data.setup("fit")
    texts = data.distinct_texts()
    key = cache_key(model.encoder, data.tokenizer, data.sequence_length(), model.readout.pooling)
    runs = {name: {"repeats": []} for name in RUNS}
    for _ in range(args.repeats):
        for name in RUNS:
            if name == "cached, cold":
                shutil.rmtree(FeatureCache(key).folder, ignore_errors=True)
            seconds, export = timed_fit(recipe, name != "uncached", paths, args.epochs, args.seed, args.out / name)
            runs[name]["repeats"].append(seconds)
            runs[name]["export"] = str(export)
            print(f"{name}: {seconds:.1f} s", flush=True)
    for run in runs.values():
        run["seconds"] = float(np.median(run["repeats"]))
    val = read_rating_table(str(paths[1]), required=("src", "mt", "ref", "score"))
    rows = {k: val[k] for k in ("src", "mt", "ref")}
    scores = {name: np.asarray(load_metric(run["export"]).score(**rows).scores) for name, run in runs.items()}
    for name, run in runs.items():
        run["max_abs_diff"] = float(np.abs(scores[name] - scores["uncached"]).max())
        run["kendall"] = float(kendall(scores[name], val["score"]))
    report = {
        "date": date.today().isoformat(),
        "machine": machine(),
        "command": f"python benchmarks/feature_cache_speed.py --rows {args.rows} --epochs {args.epochs} "
        f"--seed {args.seed} --repeats {args.repeats}",
        "seed": args.seed, "epochs": args.epochs, "train_rows": len(data.train_rows["mt"]),
        "val_rows": len(val["mt"]), "distinct_sentences": len(texts),
        "steps": args.epochs * -(-len(data.train_rows["mt"]) // data.batch_size), "runs": runs,
    }  # fmt: skip
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    publish("feature-cache", report, __file__)
    print(report_table(report))


if __name__ == "__main__":
    main()
