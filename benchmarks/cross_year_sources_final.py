"""The cross-year suite's final stage (see ``cross_year_sources.py``): the choice, its parts and the
baselines scored on uk-en and ja-en by the real scorer, the signals-only combination fitted and scored,
and every comparison as a paired interval over whole documents."""

from __future__ import annotations

from pathlib import Path

import common
import numpy as np
from cached_scoring import fit_signals_only, signals_only_scores
from cross_year import Scores, ensemble
from cross_year_sources import COMBINATION_ROWS, DEV, MARGIN, RECIPE, TEST, frozen_config
from generalisation import BASELINES, ensemble_from_members

from lightning_metrics.correlation import kendall
from lightning_metrics.storage.artifact import is_exported

BASELINE_LABELS = ("BLEU", "chrF", "BERTScore", "BERTScore-e5")
COMBINATION = "signals only (least squares)"


def seed_ensemble(members: list[str], folder: Path, scores: Scores, split: str) -> np.ndarray:
    """The three seeds as one ``export --ensemble`` folder (members standardised on 5,000 WMT21 DA rows)."""
    from lightning_metrics.data.readers import read_rating_table
    from lightning_metrics.encoders.inference import ScoreOptions
    from lightning_metrics.metrics.ensemble_export import export_ensemble

    if not is_exported(folder):
        table = read_rating_table(str(common.DA), required=("src", "mt", "ref", "score"))
        export_ensemble(
            [f"seed{i}={m}" for i, m in enumerate(members)], folder, {k: table[k] for k in ("src", "mt", "ref")},
            force=True, options=ScoreOptions(device="cpu", progress=False),
        )  # fmt: skip
    values = [scores.of(m, split, f"seed{i}-{Path(m).parent.name}") for i, m in enumerate(members)]
    return ensemble_from_members(folder, values)


def learned_scores(suite, scores: Scores, split: str) -> tuple[str, np.ndarray, str]:
    """The seeds stage's choice on ``split``: its label, its scores and an export of it (for ensembling)."""
    seeds = suite.state["seeds"]
    if seeds["kept"] == "ensemble":
        folder = suite.out / "seed_ensemble"
        return "learned (three seeds)", seed_ensemble(seeds["ensemble_members"], folder, scores, split), str(folder)
    export = str(suite.out / "soup") if seeds["kept"] == "soup" else suite.state["selection"]["export"]
    label = "learned (soup of three data orders)" if seeds["kept"] == "soup" else "learned"
    return label, scores.of(export, split, common.safe_name(label)), export


def combination(suite, scores: Scores, export: str) -> dict[str, np.ndarray]:
    """The signals-only combination's scores per split: least squares of the model's signals and
    BERTScore-e5 on :data:`COMBINATION_ROWS` seeded training rows, with their training targets and weights."""
    import yaml

    from lightning_metrics.baselines.signals import compute_signals
    from lightning_metrics.data.modules import RatingsDataModule
    from lightning_metrics.metrics import load_metric, score_many
    from lightning_metrics.parallel import default_num_proc

    spec = load_metric(export).model.signal_spec if Path(export, "metric.json").is_file() else None
    choice = suite.state["selection"]["choice"]
    config = frozen_config(yaml.safe_load(RECIPE.read_text()), suite.ratings, choice, 0, 0, suite.source_paths(choice))
    model_args, data_args = config["model"]["init_args"], config["data"]["init_args"]
    spec = spec or model_args["signals"]
    data = RatingsDataModule(**{**data_args, "encoder": model_args["encoder"], "signals": spec,
                                "layout": {"input_format": "sentences", "text_fields": ["mt", "ref"]}})  # fmt: skip
    data.setup("fit")
    rows = data.train_rows
    pick = np.sort(np.random.default_rng(suite.seed).choice(len(rows["mt"]), COMBINATION_ROWS, replace=False))
    mt, ref = [rows["mt"][i] for i in pick], [rows["ref"][i] for i in pick]
    e5 = score_many([BASELINES["BERTScore-e5"]], mt, ref, num_proc=default_num_proc())[BASELINES["BERTScore-e5"]]
    features = np.column_stack([np.stack([rows["signals"][i] for i in pick]), e5])
    fit = fit_signals_only(features, [rows["score"][i] for i in pick], [rows["weight"][i] for i in pick])
    suite.state["combination"] = {"signals": [*data.signal_spec.names, "bertscore-e5"], **fit}
    out = {}
    for split in (DEV, TEST):
        split_rows = scores.rows[split]
        signals = compute_signals(data.signal_spec, split_rows["mt"], split_rows["ref"], num_proc=default_num_proc())
        e5_split = scores.of(BASELINES["BERTScore-e5"], split, "BERTScore-e5")
        out[split] = signals_only_scores(fit, np.column_stack([signals, e5_split]))
    return out


def final_stage(suite, bootstrap: int) -> None:
    scores = Scores(suite.out, suite.seed)
    values: dict[str, dict[str, np.ndarray]] = {DEV: {}, TEST: {}}
    label, export = None, None
    for split in (DEV, TEST):  # ja-en is scored here, once, after every choice was made on uk-en
        for name in BASELINE_LABELS:
            values[split][name] = scores.of(BASELINES[name], split, name)
        label, values[split][label], export = learned_scores(suite, scores, split)
        values[split][f"{label} + BERTScore-e5"] = ensemble(Path(export), "chosen", suite.out, scores, split)
    dev = {m: float(kendall(v, scores.rows[DEV]["score"])) for m, v in values[DEV].items()}
    plus = f"{label} + BERTScore-e5"
    chosen = plus if dev[plus] >= dev[label] + MARGIN else label
    parts = combination(suite, scores, suite.state["selection"]["export"])
    for split in (DEV, TEST):
        values[split][COMBINATION] = parts[split]
    real = values[DEV][label] if label == "learned" else None
    if real is not None:  # the cached scorer that chose the heads, against the real one
        from lightning_metrics.metrics import load_metric

        cached = suite.dev_scorer.scores(load_metric(export).model)
        suite.state["cached_vs_real_max_diff"] = float(np.abs(cached - real).max())
    suite.state["final"] = {"chosen": chosen, "learned": label, "dev_choice": dev, "splits": {}}
    for split in (DEV, TEST):
        rows = scores.rows[split]
        human, docs = rows["score"], [f"{d}" for d in rows["doc_id"]]
        table = {}
        for metric, v in values[split].items():
            paired = common.paired_kendall(v, values[split]["BERTScore-e5"], human, bootstrap, suite.seed, docs)
            table[metric] = {"kendall": paired["kendall"], "ci": paired["ci"]}
        gains = {}
        for base in ("BERTScore-e5", "chrF", COMBINATION):
            for metric in {chosen, label}:
                if metric != base:
                    paired = common.paired_kendall(
                        values[split][metric], values[split][base], human, bootstrap, suite.seed, docs
                    )
                    gains[f"{metric} minus {base}"] = {"gain": paired["change"], "ci": paired["change_ci"]}
        suite.state["final"]["splits"][split] = {"rows": len(human), "documents": len(set(docs)), "metrics": table,
                                                 "gains": gains, "resampled": paired["resampled"]}  # fmt: skip
    suite.save()
