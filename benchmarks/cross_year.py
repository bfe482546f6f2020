"""Cross-year suite: a metric trained on every WMT21 rating, scored on WMT22 DA (a later year).

    .venv/bin/python benchmarks/cross_year.py [--recipe configs/recipes/generalist-multilingual.yaml]
        [--out runs/cross_year] [--variants recipe ...] [--stages fit trajectory score report]

Training uses the recipe's sources as they are (nothing of WMT22 is in them). WMT22 **uk-en is the
cross-year dev set** and **ja-en the cross-year test** (``../shared/data/wmt22_da_toen_jaen_uken.csv``):
every choice is made on uk-en (a checkpoint or a soup on a 4,000-row sample of its documents, the final
metric on all of it) and on the WMT21 dev split the fit logs; ja-en is scored for the report alone.

Stages (cached under ``--out``): ``fit`` trains each variant (``generalisation.VARIANTS`` and the
cross-year levers in :data:`LEVERS`) once, with its WMT21 dev Kendall logged every 50 steps and a
checkpoint kept at each of them; ``trajectory`` exports those checkpoints and scores them on the uk-en
sample (the dev curve across years beside the WMT21 one, and each step's agreement with its BERTScore
signal), and the **soups** (uniform weight averages of the checkpoints from a step on,
:func:`lightning_metrics.metrics.interpolation.average_exports`); ``score`` scores the recipe's own
checkpoint and each variant's checkpoint the sample prefers on uk-en and ja-en, beside BLEU, chrF,
BERTScore (MiniLM layer 4, e5 layer 7) and each one's ensemble with BERTScore-e5; ``report`` gives the
learned part's own contribution (paired bootstrap over segments), the dev choice against the targets,
and the diagnostics on uk-en (Kendall within one source's outputs, and against the raw scores).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import yaml
from cross_year_report import diagnostics, report
from generalisation import BASELINES, VARIANTS, derived_config, ensemble_from_members, ensemble_member, timed
from generalisation_report import correlations

from lightning_metrics.correlation import kendall
from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.storage.artifact import is_exported

REPO = common.REPO
WMT22 = common.SHARED / "wmt22_da_toen_jaen_uken.csv"
DEV, TEST = "uk-en", "ja-en"
EVERY = 50  # steps between validations and kept checkpoints
# the cross-year levers (dotted config keys -> values), beside generalisation.VARIANTS
E5_START = {
    "model.init_args.signals.encoder": "multilingual-e5-small",
    "model.init_args.head.start_from": "bertscore_f",
}
LEVERS = {
    # the head starts as BERTScore-e5 (its layer 7 F1 through the skip) and learns a correction
    "start from BERTScore-e5": E5_START,
    # ... a correction pulled toward zero (and the encoder toward its pre-trained weights): L2-SP from the start
    "start from BERTScore-e5, pulled": {**E5_START, "model.init_args.objective.l2_to_start": 1.0},
    # ... with the encoder frozen: the correction reads fixed embeddings
    "start from BERTScore-e5, frozen encoder": {**E5_START, "model.init_args.optim.trainable": ["head"]},
}
VARIANTS.update(LEVERS)  # derived_config reads a variant's lever from generalisation's table
BASELINE_LABELS = ("BLEU", "chrF", "BERTScore", "BERTScore-e5")
SAMPLE, SAMPLE_ROWS = "uk-en sample", 4000  # whole uk-en documents: the trajectory's dev set
SOUP_STARTS = (50, 100, 150, 200)  # a soup averages the kept checkpoints from this step to the last
STAGES = ["fit", "trajectory", "score", "report"]


def variant_config(recipe: dict, variant: str) -> dict:
    """The recipe with ``variant``'s lever, validated and checkpointed every :data:`EVERY` steps."""
    config = derived_config(recipe, None, variant)
    config["trainer"]["val_check_interval"] = EVERY
    return config


def run_folder(out: Path, variant: str, config: dict) -> Path:
    """The run folder of ``variant`` fitted with ``config`` (its :func:`variant_config`)."""
    return out / "models" / f"{variant.replace(' ', '_').replace(',', '')}-{common.digest(config)}"


def fit(recipe: dict, variant: str, out: Path, times: dict) -> Path:
    """Fit (or reuse) ``variant``; returns its run folder (``export/``, ``steps/*.ckpt``, CSV logs)."""
    config = variant_config(recipe, variant)
    run_dir = run_folder(out, variant, config)
    config["trainer"]["callbacks"].append(
        {
            "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
            "init_args": {
                "dirpath": str(run_dir / "steps"),
                "filename": "{step}",
                "every_n_train_steps": EVERY,
                "save_top_k": -1,
                "save_weights_only": True,
            },
        }
    )
    _, seconds = common.fit_config(config, run_dir, f"fit {variant}")
    times[f"fit {variant}"] = seconds
    return run_dir


def rows_of(table: dict, lp: str) -> dict:
    keep = [i for i, x in enumerate(table["lp"]) if x == lp]
    return {k: [v[i] for i in keep] for k, v in table.items()}


def document_sample(rows: dict, n: int, seed: int) -> dict:
    """Whole documents of ``rows``, drawn in a seeded order until at least ``n`` rows (the trajectory's dev sample)."""
    docs = sorted(set(rows["doc_id"]))
    order = np.random.default_rng(seed).permutation(len(docs))
    chosen, count = set(), 0
    for i in order:
        if count >= n:
            break
        chosen.add(docs[i])
        count += rows["doc_id"].count(docs[i])
    keep = [i for i, d in enumerate(rows["doc_id"]) if d in chosen]
    return {k: [v[i] for i in keep] for k, v in rows.items()}


class Scores:
    """Segment scores on the cross-year sets (``uk-en``, ``ja-en``, ``uk-en sample``), cached under ``out/scores``."""

    def __init__(self, out: Path, seed: int):
        table = read_rating_table(str(WMT22), required=("src", "mt", "ref", "score"))
        self.out, self.rows = out, {DEV: rows_of(table, DEV), TEST: rows_of(table, TEST)}
        self.rows[SAMPLE] = document_sample(self.rows[DEV], SAMPLE_ROWS, seed)

    def of(self, spec: str | Path, split: str, name: str) -> np.ndarray:
        return common.cached_scores(str(spec), self.rows[split], self.out / "scores" / split.replace(" ", "_"), name)

    def kendall(self, spec, split: str, name: str) -> float:
        return float(kendall(self.of(spec, split, name), self.rows[split]["score"]))


def step_exports(run_dir: Path) -> dict[int, Path]:
    """The run's kept checkpoints as exports (each checkpoint deleted once exported), by step."""
    from lightning_metrics.training.export import export_checkpoint

    exports = run_dir / "step_exports"
    for ckpt in sorted((run_dir / "steps").glob("step=*.ckpt")):
        if not is_exported(exports / ckpt.stem):
            export_checkpoint(ckpt, exports / ckpt.stem, force=True)
        ckpt.unlink()
    found = {int(p.name.split("=")[1]): p for p in exports.glob("step=*") if is_exported(p)}
    return dict(sorted(found.items()))


def trajectory(run_dir: Path, scores: Scores) -> dict:
    """Every kept checkpoint scored on the uk-en sample (Kendall with the ratings, and with BERTScore), beside
    the WMT21 dev Kendall the fit logged at that step; the soups of the checkpoints from each of
    :data:`SOUP_STARTS` on, scored the same way. Returns ``{"steps": {step: {...}}, "soups": {start: kendall}}``."""
    from lightning_metrics.metrics.interpolation import average_exports

    exports = step_exports(run_dir)
    steps = list(exports)
    logged = logged_dev(run_dir)
    result = {"steps": {}, "soups": {}}
    signal = scores.of(BASELINES["BERTScore"], SAMPLE, "BERTScore")  # the model's own signal (MiniLM layer 4)
    for step in steps:
        name = f"{run_dir.name}-step{step}"
        values = scores.of(exports[step], SAMPLE, name)
        result["steps"][step] = {
            "uk-en sample": float(kendall(values, scores.rows[SAMPLE]["score"])),
            "agreement with BERTScore": float(kendall(values, signal)),  # how closely it still ranks as its signal
            **logged.get(step, {}),
        }
    for first in SOUP_STARTS:
        members = [exports[s] for s in steps if s >= first]
        if len(members) < 2:
            continue
        soup = run_dir / "soups" / f"from_{first}"
        if not is_exported(soup):
            average_exports(members, soup, force=True, chosen_on={"members": [m.name for m in members]})
        result["soups"][first] = scores.kendall(soup, SAMPLE, f"{run_dir.name}-soup{first}")
    return result


def logged_dev(run_dir: Path) -> dict[int, dict]:
    """The WMT21 dev Kendall (overall and per source) the fit logged, by step (the checkpoint's step)."""
    import pandas as pd

    found = sorted(run_dir.glob("lightning_logs/version_*/metrics.csv"))
    if not found:
        return {}
    table = pd.read_csv(found[-1])
    columns = [c for c in table.columns if c.startswith("val_kendall")]
    rows = table.dropna(subset=["val_kendall"])
    # a validation after training step k logs step k - 1; the checkpoint of that moment is named step=k
    return {int(r["step"]) + 1: {c: float(r[c]) for c in columns if np.isfinite(r[c])} for _, r in rows.iterrows()}


def ensemble(
    export: Path, name: str, out: Path, scores: Scores, split: str, partner: str = "BERTScore-e5"
) -> np.ndarray:
    """``export`` + ``partner`` as one ``export --ensemble`` folder (equal weights, each standardised on 5,000
    seeded WMT21 DA rows); its scores on ``split`` from the members' cached scores."""
    from lightning_metrics.encoders.inference import ScoreOptions
    from lightning_metrics.metrics.ensemble_export import export_ensemble

    label, spec, _ = ensemble_member(partner, "")
    folder = out / "ensembles" / f"{name}+{label}"
    if not is_exported(folder):
        table = read_rating_table(str(common.DA), required=("src", "mt", "ref", "score"))
        table = {k: table[k] for k in ("src", "mt", "ref")}
        export_ensemble(
            [f"learned={export}", spec], folder, table, force=True, options=ScoreOptions(device="cpu", progress=False)
        )
    return ensemble_from_members(folder, [scores.of(export, split, name), scores.of(BASELINES[label], split, label)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default=str(REPO / "configs/recipes/generalist-multilingual.yaml"))
    parser.add_argument("--out", default="runs/cross_year")
    parser.add_argument("--variants", nargs="+", default=["recipe"], choices=list(VARIANTS))
    parser.add_argument(
        "--trajectory", nargs="*", default=None, help="variants whose checkpoints are scored (default: every one)"
    )
    parser.add_argument("--stages", nargs="+", default=STAGES, choices=STAGES)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recipe = yaml.safe_load(Path(args.recipe).read_text(encoding="utf-8"))
    state_path, times_path = out / "results.json", out / "times.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    times = json.loads(times_path.read_text()) if times_path.is_file() else {}
    scores = Scores(out, args.seed)
    args.trajectory = args.variants if args.trajectory is None else args.trajectory
    learned = {}
    for variant in args.variants:
        if "fit" in args.stages:
            run_dir = fit(recipe, variant, out, times)
        else:
            run_dir = run_folder(out, variant, variant_config(recipe, variant))
        if (run_dir / "seconds.txt").is_file():  # the fit's wall time, also where this call did not fit
            times[f"fit {variant}"] = float((run_dir / "seconds.txt").read_text())
        if variant in args.trajectory and ("trajectory" in args.stages or variant not in state.get("trajectory", {})):
            with timed(times, f"trajectory {variant}"):
                state.setdefault("trajectory", {})[variant] = trajectory(run_dir, scores)
        path = state.get("trajectory", {}).get(variant)
        if variant == "recipe" or not path:  # the fit's own choice: the best WMT21 dev Kendall (all sources)
            learned[variant] = run_dir / "export"
        if path:  # the checkpoint the uk-en sample prefers (the soups are in the trajectory's table)
            step = max(path["steps"], key=lambda k: path["steps"][k]["uk-en sample"])
            learned[f"{variant}, checkpoint by uk-en dev (step {step})"] = step_exports(run_dir)[int(step)]
        state["times"] = times
        state_path.write_text(json.dumps(state, indent=1) + "\n")
    if "score" in args.stages or "report" in args.stages:
        with timed(times, "score and report"):
            measure(state, learned, scores, out, args)
        state["times"] = times
        state_path.write_text(json.dumps(state, indent=1) + "\n")
        command = "python benchmarks/cross_year.py " + " ".join(
            f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items()
        )
        print("\n".join(report(state, out, command)))


def measure(state: dict, learned: dict[str, Path], scores: Scores, out: Path, args) -> None:
    """Correlations on uk-en and ja-en of the baselines, each learned metric and its ensemble with
    BERTScore-e5; the learned part's paired gains; the dev choice; the diagnostics on uk-en."""
    state["correlations"], state["gains"], values = {}, {}, {}
    for split in (DEV, TEST):
        table = {label: scores.of(BASELINES[label], split, label) for label in BASELINE_LABELS}
        for name, export in learned.items():
            key = name.replace(" ", "_").replace(",", "")
            table[name] = scores.of(export, split, key)
            table[f"{name} + BERTScore-e5"] = ensemble(export, key, out, scores, split)
        values[split] = table
        state["correlations"][split] = correlations(table, scores.rows[split], args.bootstrap, args.seed)
    for name in learned:
        for base, label in (
            (f"{name} + BERTScore-e5", f"{name} + BERTScore-e5 minus BERTScore-e5"),
            (name, f"{name} minus BERTScore-e5"),
        ):
            state["gains"][label] = {}
            for split in (DEV, TEST):
                human, base_values = scores.rows[split]["score"], values[split]["BERTScore-e5"]
                paired = common.paired_kendall(values[split][base], base_values, human, args.bootstrap, args.seed)
                state["gains"][label][split] = {"gain": paired["change"], "ci": paired["change_ci"]}
    candidates = [m for m in values[DEV] if m not in BASELINE_LABELS]
    state["chosen"] = max(candidates, key=lambda m: state["correlations"][DEV][m]["kendall"])
    state["diagnostics"] = diagnostics(values[DEV], scores.rows[DEV])


if __name__ == "__main__":
    main()
