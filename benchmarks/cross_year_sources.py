"""A recipe across years: a metric trained on every rating source of 2021 and earlier, chosen on WMT22
uk-en, scored once on WMT22 ja-en.

    .venv/bin/python benchmarks/cross_year_sources.py RATINGS [--out runs/cross_year_sources]
        [--stages fit final report] [--seed 0] [--bootstrap 1000]

``RATINGS`` is the folder ``benchmarks/ratings/build.py`` wrote. Every model is the multilingual recipe
(``configs/recipes/generalist-multilingual.yaml``: multilingual-e5-small, hybrid signals on MiniLM) with
its encoder frozen, so every fit trains its head from the feature cache; :data:`STEPS` steps, a head kept
every :data:`EVERY` steps.

**The rule, fixed before any fit of this suite ran.** Each lever of :data:`LEVERS` is tried in that
order on top of the configuration chosen so far. A configuration's value is the Kendall tau-b of its
best kept head on all 16,470 uk-en rows (the head is chosen there too). A lever is kept when it raises
that value by at least :data:`MARGIN` over the configuration without it; otherwise it is dropped.
After the levers, three seeds of the choice are tried as a soup (one initialisation, three data
orders) and as an ensemble (three seeds), then the choice's ensemble with BERTScore-e5, each on the
same rule. Then ja-en is scored once, for the choice, the baselines and the signals-only combination.

**Credit.** The learned part is measured against a least-squares combination of the signals the
metric reads (BLEU, chrF, BERTScore on MiniLM, and BERTScore on e5 where the choice is an ensemble
with it), fitted to the same training targets on :data:`COMBINATION_ROWS` seeded training rows.
Intervals resample whole documents (ja-en: 321 documents).

Stages (cached under ``--out``, in ``state.json``): ``fit`` fits and scores every lever on uk-en (heads
by the feature cache: :mod:`cached_scoring`); ``final`` scores the choice, its parts and the baselines on
uk-en and ja-en with the real scorer, fits the signals-only combination and the paired intervals;
``report`` writes ``docs/results/cross-year-sources.{json,md}``.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import random
import shutil
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import yaml
from cached_scoring import CachedScorer
from cross_year import rows_of

from data_gen.perturbations import build
from lightning_metrics.correlation import kendall
from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.storage.artifact import is_exported

REPO = common.REPO
RECIPE = REPO / "configs" / "recipes" / "generalist-multilingual.yaml"
WMT22 = common.SHARED / "wmt22_da_toen_jaen_uken.csv"
DEV, TEST = "uk-en", "ja-en"
STEPS, EVERY = 3000, 250
MARGIN = 0.002
COMBINATION_ROWS = 20000
SEEDS = (0, 1, 2)
FAILURES = ("undertranslation", "duplication", "gibberish", "missing_punctuation", "unrelated")
# the rating sources (files of benchmarks/ratings/build.py), as the data module reads them
SOURCES = {
    "da21": {"path": "da_wmt21.csv"},  # is, ja, ru -> en
    "da20": {"path": "da_wmt20.csv"},  # en-de, zh-en (the systems MQM rated)
    "da17": {"path": "da_wmt17.csv", "split_by": "seg_id"},  # seven pairs into English, no documents, lower-cased
    "mqm20": {"path": "mqm_newstest2020.jsonl"},  # en-de, zh-en
    "mqm21": {"path": "mqm_newstest2021.jsonl"},  # en-de, zh-en, en-ru
    "ted21": {"path": "mqm_ted2021.jsonl"},  # en-de, zh-en, en-ru
}
START = {"sources": {"da21": {}, "mqm21": {"lps": ["zh-en"]}, "ted21": {"lps": ["zh-en"]}}}  # the shipped recipe's
LEVERS = [  # name -> what it changes on the configuration chosen so far
    # WMT17's only copy is lower-cased and tokenised (benchmarks/ratings/da_sources.py): not a lever
    ("+ DA of 2020", {"add": {"da20": {}}}),
    ("+ MQM of 2020, and every MQM pair", {"add": {"mqm20": {}, "mqm21": {}, "ted21": {}}}),
    ("DA first, then DA with MQM", {"two_stage": True}),
    ("+ synthetic failure cases (5% of DA rows)", {"synthetic": 0.05}),
    ("MQM at half weight", {"weights": {"mqm20": 0.5, "mqm21": 0.5, "ted21": 0.5}}),
    ("pairwise loss doubled", {"set": {"model.init_args.objective.pairwise_weight": 1.0}}),
]


def frozen_config(
    recipe: dict, ratings: Path, choice: dict, seed: int, data_seed: int, paths: dict | None = None
) -> dict:
    """The recipe with the encoder frozen, ``choice``'s sources and settings (``paths``: files that replace
    a source's, the synthetic lever's), a head kept every :data:`EVERY` of :data:`STEPS` steps."""
    config = copy.deepcopy(recipe)
    model, data, trainer = config["model"]["init_args"], config["data"]["init_args"], config["trainer"]
    model["optim"] = {**model["optim"], "trainable": ["layer_mix", "head"], "nr_frozen_epochs": 0.0}
    weights = choice.get("weights", {})
    data["train"] = [
        {**SOURCES[name], **extra, "path": str((paths or {}).get(name, ratings / SOURCES[name]["path"])), "name": name}
        | ({"weight": weights[name]} if name in weights else {})
        for name, extra in choice["sources"].items()
    ]
    data["batches"] = {**data["batches"], "num_workers": 0}
    data["seed"], config["seed_everything"] = data_seed, seed
    trainer.update(max_steps=STEPS, val_check_interval=EVERY, num_sanity_val_steps=0)
    trainer["callbacks"] = [c for c in trainer["callbacks"] if "ModelCheckpoint" not in c["class_path"]]
    trainer["callbacks"].append({
        "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
        "init_args": {"dirpath": "steps", "filename": "{step}", "every_n_train_steps": EVERY, "save_top_k": -1,
                      "save_weights_only": True},
    })  # fmt: skip
    for dotted, value in choice.get("set", {}).items():
        node = config
        *path, last = dotted.split(".")
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    if choice.get("init_from"):
        model["init_from"] = choice["init_from"]
    return config


def applied(choice: dict, lever: dict) -> dict:
    """``choice`` with ``lever``'s changes."""
    out = copy.deepcopy(choice)
    out["sources"].update(lever.get("add", {}))
    out.setdefault("weights", {}).update(lever.get("weights", {}))
    out.setdefault("set", {}).update(lever.get("set", {}))
    out["two_stage"] = out.get("two_stage", False) or lever.get("two_stage", False)
    out["synthetic"] = lever.get("synthetic", out.get("synthetic", 0.0))
    return out


def synthetic_source(path: Path, out: Path, share: float, seed: int) -> Path:
    """A copy of the DA source ``path`` with ``share`` more rows: sampled rows whose mt is one of
    :data:`FAILURES`, scored as the worst z of their language pair (missing punctuation: their own z
    minus 1), the system named ``synthetic-<failure>``. Written once to ``out``."""
    target = out / f"{path.stem}+synthetic{share}-{seed}.csv"
    if target.is_file():
        return target
    table = read_rating_table(str(path), required=("src", "mt", "ref", "score"))
    n = len(table["mt"])
    rng = random.Random(seed)
    worst = {lp: min(z for z, p in zip(table["score"], table["lp"]) if p == lp) for lp in set(table["lp"])}
    added = {k: [] for k in table}
    for i in rng.sample(range(n), int(share * n)):
        name = FAILURES[rng.randrange(len(FAILURES))]
        pool = [
            m
            for m, lp, d in zip(table["mt"], table["lp"], table["doc_id"])
            if lp == table["lp"][i] and d != table["doc_id"][i]
        ]
        mt = build(name, **({"pool": pool[:500]} if name == "unrelated" else {})).apply(table["mt"][i], rng)
        if mt is None:
            continue
        for k in table:
            added[k].append(table[k][i])
        added["mt"][-1], added["system"][-1] = mt, f"synthetic-{name}"
        added["score"][-1] = table["score"][i] - 1.0 if name == "missing_punctuation" else worst[table["lp"][i]]
    out.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(list(table))
        writer.writerows(zip(*[table[k] + added[k] for k in table]))
    return target


class Suite:
    def __init__(self, ratings: Path, out: Path, seed: int):
        self.ratings, self.out, self.seed = ratings, out, seed
        self.recipe = yaml.safe_load(RECIPE.read_text())
        self.state_path = out / "state.json"
        self.state = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        table = read_rating_table(str(WMT22), required=("src", "mt", "ref", "score"))
        self.rows = {DEV: rows_of(table, DEV), TEST: rows_of(table, TEST)}
        max_length = self.recipe["data"]["init_args"]["batches"]["max_length"]
        self.dev_scorer = CachedScorer({k: self.rows[DEV][k] for k in ("src", "mt", "ref")}, max_length)

    def source_paths(self, choice: dict) -> dict:
        """The files that replace a source's in ``choice``: its DA sources with synthetic rows, if it asks."""
        return {
            name: synthetic_source(self.ratings / SOURCES[name]["path"], self.out / "synthetic", choice["synthetic"], 0)
            for name in choice["sources"]
            if choice.get("synthetic") and name.startswith("da")
        }

    def save(self) -> None:
        self.state_path.write_text(json.dumps(self.state, indent=1) + "\n")

    def fit(self, name: str, choice: dict, seed: int = 0, data_seed: int | None = None) -> dict:
        """Fits ``choice`` (reused while its config is unchanged); every kept head scored on all uk-en rows,
        the best one exported. Returns ``{"config", "steps": {step: kendall}, "best_step", "kendall", "export"}``."""
        if choice.get("two_stage") and not choice.get("init_from"):
            da_only = {
                **choice,
                "two_stage": False,
                "sources": {k: v for k, v in choice["sources"].items() if k.startswith("da")},
            }
            first = self.fit(f"{name}: DA stage", da_only, seed, data_seed)
            choice = {**choice, "init_from": first["export"]}
        data_seed = seed if data_seed is None else data_seed
        config = frozen_config(self.recipe, self.ratings, choice, seed, data_seed, self.source_paths(choice))
        run_dir = self.out / "models" / f"{common.safe_name(name)[:60]}-{common.digest(config)}"
        done = self.state.setdefault("fits", {}).get(run_dir.name)
        if done and is_exported(Path(done["export"])):
            return done
        config["trainer"]["callbacks"][-1]["init_args"]["dirpath"] = str(run_dir / "steps")
        _, seconds = common.fit_config(config, run_dir, f"fit {name}")
        result = self.score_steps(run_dir)
        result.update(name=name, seconds=seconds, choice=choice)
        self.state["fits"][run_dir.name] = result
        self.save()
        return result

    def score_steps(self, run_dir: Path) -> dict:
        """Every kept head's uk-en Kendall; the best exported to ``run_dir/chosen``, the other checkpoints removed."""
        from lightning_metrics.models import CometEstimator
        from lightning_metrics.training.export import export_checkpoint

        human = self.rows[DEV]["score"]
        steps = {}
        checkpoints = {int(p.stem.split("=")[1]): p for p in (run_dir / "steps").glob("step=*.ckpt")}
        for step, path in sorted(checkpoints.items()):
            model = CometEstimator.load_from_checkpoint(path, weights_only=True, map_location="cpu")
            steps[step] = float(kendall(self.dev_scorer.scores(model), human))
            print(f"  step {step}: uk-en {steps[step]:.4f}", flush=True)
        best = max(steps, key=steps.get)
        export = export_checkpoint(checkpoints[best], run_dir / "chosen", force=True)
        shutil.rmtree(run_dir / "steps")
        return {"steps": steps, "best_step": best, "kendall": steps[best], "export": str(export)}

    def select(self) -> dict:
        """The forward selection of :data:`LEVERS` under the rule of the module docstring."""
        choice = copy.deepcopy(START)
        current = self.fit("start: the shipped recipe's sources", choice)
        trail = [{"lever": "start", "kendall": current["kendall"], "kept": True, "step": current["best_step"]}]
        for lever, change in LEVERS:
            candidate = applied(choice, change)
            result = self.fit(lever, candidate)
            kept = result["kendall"] >= current["kendall"] + MARGIN
            trail.append({"lever": lever, "kendall": result["kendall"], "gain": result["kendall"] - current["kendall"],
                          "kept": kept, "step": result["best_step"]})  # fmt: skip
            print(f"{lever}: uk-en {result['kendall']:.4f} ({'kept' if kept else 'dropped'})", flush=True)
            if kept:
                choice, current = candidate, result
        self.state["selection"] = {"trail": trail, "choice": choice, "export": current["export"]}
        self.save()
        return self.state["selection"]

    def seeds(self, selection: dict) -> dict:
        """The choice as a soup of three data orders (one initialisation) and as an ensemble of three seeds,
        each against the single model on the rule (uk-en values of the soup and of the ensemble's mean
        standardised scores)."""
        from lightning_metrics.metrics import load_metric
        from lightning_metrics.metrics.interpolation import average_exports

        choice, human = selection["choice"], self.rows[DEV]["score"]
        orders = [self.fit(f"soup member, data order {s}", choice, 0, s)["export"] for s in SEEDS]
        soup = self.out / "soup"
        if not is_exported(soup):
            average_exports(orders, soup, force=True, chosen_on={"members": orders})
        members = [self.fit(f"ensemble member, seed {s}", choice, s, s)["export"] for s in SEEDS]
        values = [self.dev_scorer.scores(load_metric(m).model) for m in members]
        mean = np.mean([(v - v.mean()) / v.std() for v in values], axis=0)
        result = {
            "single": self.state["fits"][Path(selection["export"]).parent.name]["kendall"],
            "soup": float(kendall(self.dev_scorer.scores(load_metric(str(soup)).model), human)),
            "ensemble": float(kendall(mean, human)),
            "soup_members": orders,
            "ensemble_members": members,
        }
        best = max(("soup", "ensemble"), key=lambda k: result[k])
        result["kept"] = best if result[best] >= result["single"] + MARGIN else "single"
        self.state["seeds"] = result
        self.save()
        return result


def main() -> None:
    from cross_year_sources_final import final_stage
    from cross_year_sources_report import write_report

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ratings", type=Path, help="the folder benchmarks/ratings/build.py wrote")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "cross_year_sources")
    parser.add_argument("--stages", nargs="+", default=["fit", "final", "report"], choices=["fit", "final", "report"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    suite = Suite(args.ratings.resolve(), args.out, args.seed)
    if "fit" in args.stages:
        suite.seeds(suite.select())
    if "final" in args.stages:
        final_stage(suite, args.bootstrap)
    if "report" in args.stages:
        write_report(
            suite.state,
            " ".join(
                [
                    "python benchmarks/cross_year_sources.py",
                    str(args.ratings),
                    *[
                        f"--{k} {' '.join(v) if isinstance(v, list) else v}"
                        for k, v in vars(args).items()
                        if k != "ratings"
                    ],
                ]
            ),
        )


if __name__ == "__main__":
    main()
