"""The in-house scenario: start from a general metric, adapt it to a few in-house ratings, measure both.

    .venv/bin/python benchmarks/in_house.py [--out runs/in_house] [--domains ted-zh-en ted-en-de]
        [--sizes 250 1000 4000] [--methods ...] [--stages data fit speed report] [--seed 0]

**Domains.** TED MQM plays the in-house data: zh-en from the generalist recipe (MiniLM), en-de from the
multilingual recipe (multilingual-e5-small). Each pair has five talks; by size, the second smallest
is the in-house dev set and the smallest and the middle one the in-house test, and the two largest
are the training pool: all splits are whole talks. Training samples of 250, 1,000 and 4,000 rows are
seeded, nested sets of whole units of 10 source segments (with every system's output) from the pool;
4,000 is the whole pool (3,887 rows).

**The general metrics** are the recipes trained without any TED row and without 15% of the WMT21 DA
documents (per language pair, seeded): 5% general dev, 10% general test. Forgetting is the change of
general test Kendall.

**Methods**, each from the general metric with ``configs/recipes/in-house.yaml`` made a full fine-tune
(``FULL_FINE_TUNE``: no adapters, every part trained, the encoder at 1e-5) unless it says so:
guarded (general rows mixed in and a strong L2 pull, the setting chosen in the first round of this
benchmark); unguarded (the full fine-tune itself); interpolated (the weight-space mix of the general metric
and the unguarded fine-tune, alpha chosen by the rule below); adapters (LoRA rank 8 on attention and
feed-forward, peft); head-only (``optim.trainable: [head]``); adapters with the head frozen (added
once the first dev sets showed that head-only forgets as much as the unguarded fine-tune) and its
interpolation with the general metric; the same at lr 1e-3 and its interpolation (added after every
other method was measured: the 3e-4 fit's dev Kendall still rose at its last step; the recipe
ships it); and from the encoder (the recipe with no start). **The rule, stated before the run** (dev
sets only): the largest in-domain dev gain whose general dev Kendall stays within 0.005 of the
general metric's. It picks alpha for interpolation and the method per domain; for the recipe, the
best mean in-domain dev gain among methods kept in every domain (``choose_across``).

Stages are cached under ``--out``: a model is reused while its export exists, scores while they are
newer than it. Segment Kendall tau-b with 95% bootstrap intervals (rows resampled); gains and
forgetting with paired bootstrap intervals. Writes ``results.json``, ``results.md`` and
``in_house_tradeoff.png`` (``in_house_report.py``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import pandas as pd
import yaml
from in_house_report import report

from lightning_metrics.correlation import kendall
from lightning_metrics.evaluation.alpha_rule import TOLERANCE, AlphaStep, pick_alpha, within_tolerance
from lightning_metrics.metrics.interpolation import interpolate_exports
from lightning_metrics.storage.artifact import is_exported

REPO = common.REPO
DA, NEWS, TED = common.DA, common.NEWS, common.TED
RECIPE = REPO / "configs/recipes/in-house.yaml"
DOMAINS = {  # in-house pair -> its general recipe and the encoder that recipe starts from
    "ted-zh-en": {"lp": "zh-en", "recipe": "generalist", "encoder": "default"},
    "ted-en-de": {"lp": "en-de", "recipe": "generalist-multilingual", "encoder": "multilingual-e5-small"},
}
UNIT = 10  # consecutive source segments per training unit
LR = "model.init_args.optim"
FULL_FINE_TUNE = {  # the in-house recipe as a full fine-tune, whatever method it ships with; methods start here
    "model.init_args.adapters.rank": 0,
    f"{LR}.lr_encoder": 1.0e-5,
    f"{LR}.trainable": ["encoder", "layer_mix", "head"],
}
METHODS = {  # fine-tunes of the general metric: overrides of FULL_FINE_TUNE
    "guarded": {"mix": 1.0, "model.init_args.objective.l2_to_start": 1.0},
    "unguarded": {},
    "adapters": {"model.init_args.adapters.rank": 8, f"{LR}.lr_encoder": 3.0e-4},
    "head-only": {f"{LR}.trainable": ["head"]},
    # added after the first sizes' dev sets showed head-only forgetting as much as the unguarded fine-tune
    "adapters, frozen head": {
        "model.init_args.adapters.rank": 8,
        f"{LR}.lr_encoder": 3.0e-4,
        f"{LR}.trainable": ["encoder", "layer_mix"],
    },
    # added after all sizes were measured: that method's dev Kendall still rose at its last step, so
    # the same adapters at a rate 3x higher go further, and interpolation pulls them back to the rule
    "adapters, frozen head, lr 1e-3": {
        "model.init_args.adapters.rank": 8,
        f"{LR}.lr_encoder": 1.0e-3,
        f"{LR}.trainable": ["encoder", "layer_mix"],
    },
}
INTERPOLATED = {  # weight-space mixes of the general metric and a fine-tune, alpha by the rule
    "interpolated": "unguarded",
    "adapters, frozen head, interpolated": "adapters, frozen head",
    "adapters, frozen head, lr 1e-3, interpolated": "adapters, frozen head, lr 1e-3",
}
ALPHAS = (0.1, 0.2, 0.4, 0.6, 0.8)  # interpolation grid; 0 and 1 are the parents
SPLITS = ("in_domain_dev", "in_domain_test", "general_dev", "general_test")


def write_splits(out: Path, seed: int) -> dict:
    """Every domain's whole-talk splits and the general DA splits as CSV files; returns their summary."""
    summary = {name: write_domain_splits(out / name, spec["lp"], seed) for name, spec in DOMAINS.items()}
    da = pd.read_csv(DA)
    docs = da[["lp", "doc_id"]].drop_duplicates().sort_values(["lp", "doc_id"])
    draw = np.random.default_rng(seed + 1).random(len(docs))
    docs["split"] = np.where(draw < 0.10, "test", np.where(draw < 0.15, "dev", "train"))
    da = da.merge(docs, on=["lp", "doc_id"])
    for split in ("train", "dev", "test"):
        da[da.split == split].drop(columns=["split"]).to_csv(out / f"general_{split}.csv", index=False)
    summary["general"] = {s: int((da.split == s).sum()) for s in ("train", "dev", "test")}
    return summary


def write_domain_splits(out: Path, lp: str, seed: int) -> dict:
    """One TED pair: dev the second smallest talk, test the smallest and the middle one, the pool the
    two largest cut into shuffled units of ``UNIT`` source segments."""
    out.mkdir(parents=True, exist_ok=True)
    ted = pd.read_csv(TED).query("lp == @lp").rename(columns={"doc": "doc_id"})
    talks = list(ted.groupby("doc_id").size().sort_values(kind="stable").index)
    roles = {"in_domain_dev": [talks[1]], "in_domain_test": [talks[0], talks[2]], "pool": talks[3:]}
    for role in ("in_domain_dev", "in_domain_test"):
        ted[ted.doc_id.isin(roles[role])].to_csv(out / f"{role}.csv", index=False)
    pool = ted[ted.doc_id.isin(roles["pool"])].copy()
    segments = pool[["doc_id", "seg_id"]].drop_duplicates().sort_values(["doc_id", "seg_id"])
    segments["unit"] = segments.doc_id.astype(str) + "#" + (segments.groupby("doc_id").cumcount() // UNIT).astype(str)
    pool = pool.merge(segments, on=["doc_id", "seg_id"])
    units = sorted(pool.unit.unique())
    np.random.default_rng(seed).shuffle(units)
    order = {u: i for i, u in enumerate(units)}
    pool = pool.assign(order=pool.unit.map(order)).sort_values(["order", "seg_id"])
    pool.assign(doc_id=pool.unit).drop(columns=["order"]).to_csv(out / "pool.csv", index=False)
    return {role: [str(t) for t in docs] for role, docs in roles.items()} | {
        "rows": {r: int(ted.doc_id.isin(d).sum()) for r, d in roles.items()}
    }


def in_domain_sample(folder: Path, n: int) -> Path:
    """The first whole units of the shuffled pool holding at least ``n`` rows (nested across sizes)."""
    path = folder / f"train_{n}.csv"
    if not path.exists():
        pool = pd.read_csv(folder / "pool.csv")
        ends = pool.groupby("doc_id", sort=False).size().cumsum()
        keep = list(ends.index[: int(np.searchsorted(ends.values, n)) + 1])
        pool[pool.doc_id.isin(keep)].to_csv(path, index=False)
    return path


def general_sample(data: Path, n: int, seed: int) -> Path:
    """Whole general-training documents (seeded) holding about ``n`` rows: general ratings mixed in."""
    path = data / f"general_mix_{n}.csv"
    if not path.exists():
        rows = pd.read_csv(data / "general_train.csv")
        docs = rows[["lp", "doc_id"]].drop_duplicates().sample(frac=1.0, random_state=seed)
        sizes = rows.groupby(["lp", "doc_id"]).size().loc[list(map(tuple, docs.values))].cumsum()
        keep = set(sizes.index[: int(np.searchsorted(sizes.values, n)) + 1])
        rows[[k in keep for k in zip(rows.lp, rows.doc_id)]].to_csv(path, index=False)
    return path


def set_key(config: dict, dotted: str, value) -> None:
    node = config
    *parents, last = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value


def general_metric(domain: str, data: Path, out: Path, times: dict) -> Path:
    """The domain's general recipe without TED and without the general dev and test documents."""
    config = yaml.safe_load((REPO / "configs/recipes" / f"{DOMAINS[domain]['recipe']}.yaml").read_text("utf-8"))
    config["data"]["init_args"]["train"] = [
        {"path": str(data / "general_train.csv"), "name": "da"},
        {"path": str(NEWS), "name": "mqm-news", "lps": ["zh-en"], "split_by": "seg_id"},
    ]
    name = DOMAINS[domain]["recipe"]
    export, times[f"fit {name}"] = common.fit_config(config, out / "models" / name, f"fit {name}")
    return export


def in_house_config(data: Path, domain: str, n: int, start: Path | None, overrides: dict, seed: int) -> dict:
    """The in-house recipe on ``n`` rows of the domain, from ``start`` (None: from the domain's encoder)."""
    config = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    args = config["model"]["init_args"]
    args["init_from"] = args["encoder"] = str(start) if start else None
    if start is None:
        args["encoder"] = DOMAINS[domain]["encoder"]
    sources = [{"path": str(in_domain_sample(data / domain, n)), "name": "in-house"}]
    if overrides.get("mix"):
        rows = len(pd.read_csv(sources[0]["path"]))
        sources.append({"path": str(general_sample(data, int(overrides["mix"] * rows), seed)), "name": "general"})
    config["data"]["init_args"].update(train=sources, val=str(data / domain / "in_domain_dev.csv"))
    config["seed_everything"] = config["data"]["init_args"]["seed"] = seed
    for key, value in {**FULL_FINE_TUNE, **overrides}.items():
        if key != "mix":
            set_key(config, key, value)
    return config


class Scorer:
    """Segment scores of exports and built-ins on the splits, cached; Kendall with intervals."""

    def __init__(self, data: Path, cache: Path, bootstrap: int, seed: int):
        self.data, self.cache, self.bootstrap, self.seed = data, cache, bootstrap, seed
        self.tables: dict[str, pd.DataFrame] = {}

    def table(self, domain: str, split: str) -> pd.DataFrame:
        path = self.data / (split if split.startswith("general") else f"{domain}/{split}")
        if str(path) not in self.tables:
            self.tables[str(path)] = pd.read_csv(f"{path}.csv")
        return self.tables[str(path)]

    def scores(self, model: str | Path, domain: str, split: str) -> np.ndarray:
        rows = self.table(domain, split)
        table = {"mt": list(rows.mt.fillna("")), "ref": list(rows.ref), "src": list(rows.src)}
        # an export's run folder under models/ names it (the same method and size exist in each domain)
        label = "_".join(Path(model).parts[-4:-1]) if is_exported(model) else f"{model}_{domain}"
        return common.cached_scores(str(model), table, self.cache, f"{label}-{split}")

    def kendall(self, model, domain: str, split: str) -> float:
        return float(kendall(self.scores(model, domain, split), self.table(domain, split).score))

    def paired(self, model, base, domain: str, split: str) -> dict:
        """Kendall of ``model`` and its difference to ``base``'s, each with a 95% bootstrap interval
        (the same resampled rows for both)."""
        human = self.table(domain, split).score.to_numpy()
        a, b = self.scores(model, domain, split), self.scores(base, domain, split)
        return common.paired_kendall(a, b, human, self.bootstrap, self.seed)


def fit_methods(domain: str, n: int, general: Path, args, times: dict) -> dict[str, Path]:
    """Every method's export at ``n`` rows (interpolation apart); fits are cached."""
    data, models = Path(args.out) / "data", Path(args.out) / "models" / domain
    exports = {}
    for method in args.methods:
        if method in INTERPOLATED:
            continue
        start = None if method == "from the encoder" else general
        overrides = {} if start is None else METHODS[method]
        config = in_house_config(data, domain, n, start, overrides, args.seed)
        run = models / f"{n}-{folder_name(method)}"
        exports[method], times[f"fit {domain} {run.name}"] = common.fit_config(config, run, f"fit {domain} {run.name}")
    return exports


def folder_name(method: str) -> str:
    return method.replace(", ", "_").replace(" ", "_")


def choose_alpha(general: Path, tuned: Path, folder: Path, domain: str, scorer: Scorer) -> dict:
    """The rule on the alpha grid (:func:`~lightning_metrics.evaluation.alpha_rule.pick_alpha`, as
    ``interpolate --dev`` applies it) on cached scores."""
    grid = {0.0: general, 1.0: tuned}
    for alpha in ALPHAS:
        out = folder / f"alpha-{alpha}" / "export"
        if not is_exported(out) or out.stat().st_mtime < tuned.stat().st_mtime:
            interpolate_exports(general, tuned, alpha, out, force=True)
        grid[alpha] = out
    dev = {a: {s: scorer.kendall(m, domain, s) for s in ("in_domain_dev", "general_dev")} for a, m in grid.items()}
    steps = [AlphaStep(a, r["in_domain_dev"], r["general_dev"]) for a, r in sorted(dev.items())]
    alpha = pick_alpha(steps, TOLERANCE).alpha
    return {"alpha": alpha, "export": grid[alpha], "grid": {str(a): r for a, r in dev.items()}}


def measure(domain: str, general: Path, args, scorer: Scorer, times: dict) -> dict:
    """Every method at every size: dev Kendall, test Kendall with intervals, gain and forgetting."""
    result = {"general": {s: scorer.kendall(general, domain, s) for s in SPLITS}, "sizes": {}}
    result["baselines"] = {m: scorer.paired(m, general, domain, "in_domain_test") for m in ("bertscore", "chrf")}
    for n in args.sizes:
        exports = fit_methods(domain, n, general, args, times)
        cells, alphas = {}, {}
        for method, parent in INTERPOLATED.items():
            if method in args.methods and parent in exports:
                folder = Path(args.out) / "models" / domain / f"{n}-{folder_name(method)}"
                alphas[method] = choose_alpha(general, exports[parent], folder, domain, scorer)
                exports[method] = alphas[method].pop("export")
        for method, export in exports.items():
            cells[method] = {s: scorer.kendall(export, domain, s) for s in ("in_domain_dev", "general_dev")}
            for split in ("in_domain_test", "general_test"):
                cells[method][split] = scorer.paired(export, general, domain, split)
        rows = len(pd.read_csv(in_domain_sample(Path(args.out) / "data" / domain, n)))
        result["sizes"][str(n)] = {"rows": rows, "methods": cells, "alphas": alphas}
    return result


def scoring_speed(start: Path, adapted: Path, control: Path, rows: pd.DataFrame, repeats: int = 3) -> dict:
    """Seconds to score ``rows`` with the start, an adapter fine-tune's export (merged) and, as a
    control, a full fine-tune's export of the same architecture, in turns after one warm-up each, the
    order reversed every other turn; medians, and the ratios to the start."""
    import time

    from lightning_metrics import load_metric

    table = {"mt": list(rows.mt.fillna("")), "ref": list(rows.ref), "src": list(rows.src)}
    metrics = {
        name: load_metric(str(path), precision="fp32")
        for name, path in (("start", start), ("adapters", adapted), ("full fine-tune", control))
    }
    seconds: dict[str, list[float]] = {name: [] for name in metrics}
    for turn in range(repeats + 1):
        for name, metric in sorted(metrics.items(), reverse=turn % 2 == 1):
            began = time.perf_counter()
            metric.score(**table, progress=False)
            if turn:  # the first turn warms up
                seconds[name].append(time.perf_counter() - began)
    medians = {name: float(np.median(values)) for name, values in seconds.items()}
    ratios = {f"{name} / start": medians[name] / medians["start"] for name in ("adapters", "full fine-tune")}
    return {**medians, "rows": len(rows), **ratios}


def kept_methods(result: dict, size: str = "1000") -> dict:
    """The methods (from the general metric) at ``size`` rows whose general dev Kendall the rule keeps."""
    methods, start = result["sizes"].get(size, {}).get("methods", {}), result["general"]["general_dev"]
    return {m: r for m, r in methods.items() if m != "from the encoder" and within_tolerance(r["general_dev"], start)}


def choose_method(result: dict, size: str = "1000") -> str | None:
    """The rule across methods (from the general metric) at ``size`` rows, on dev."""
    kept = kept_methods(result, size)
    return max(kept, key=lambda m: kept[m]["in_domain_dev"]) if kept else None


def choose_across(domains: dict, size: str = "1000") -> str | None:
    """The recipe's rule: among methods kept by the rule in every domain at ``size`` rows, the best mean
    in-domain dev gain over each domain's general metric."""
    kept = [set(kept_methods(result, size)) for result in domains.values()]
    common_methods = set.intersection(*kept) if kept else set()

    def mean_gain(method: str) -> float:
        gains = [
            r["sizes"][size]["methods"][method]["in_domain_dev"] - r["general"]["in_domain_dev"]
            for r in domains.values()
        ]
        return float(np.mean(gains))

    return max(sorted(common_methods), key=mean_gain) if common_methods else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "runs" / "in_house"))
    parser.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=list(DOMAINS))
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 1000, 4000])
    methods = [*METHODS, *INTERPOLATED, "from the encoder"]
    parser.add_argument("--methods", nargs="+", default=methods, choices=methods)
    stages = ["data", "fit", "speed", "report"]
    parser.add_argument("--stages", nargs="+", default=stages, choices=stages)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    data, times, state_path = out / "data", {}, out / "results.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    if "data" in args.stages or not (data / "general_train.csv").exists():
        state["splits"] = write_splits(data, args.seed)
    scorer = Scorer(data, out / "scores", args.bootstrap, args.seed)
    for domain in args.domains if "fit" in args.stages else []:
        general = general_metric(domain, data, out, times)
        earlier = state.setdefault("domains", {}).get(domain, {})
        result = state["domains"][domain] = measure(domain, general, args, scorer, times)
        result["chosen"] = choose_method(result)
        adapted = out / "models" / domain / "1000-adapters" / "export"
        if "speed" in args.stages and is_exported(adapted):
            control = out / "models" / domain / "1000-unguarded" / "export"
            result["speed"] = scoring_speed(general, adapted, control, scorer.table(domain, "in_domain_test"))
        elif "speed" in earlier:
            result["speed"] = earlier["speed"]
        state.setdefault("times", {}).update(times)
        state_path.write_text(json.dumps(state, indent=1, default=str), encoding="utf-8")
    if "report" in args.stages:
        state["chosen_for_recipe"] = choose_across(state.get("domains", {}))
        report(state, out)


if __name__ == "__main__":
    main()
