"""Error spans on data never trained on: the error-spans recipe (and its sentence-only twin, the same fit
with ``word_weight: 0``) on generalMT2023's side-by-side MQM (en-de, zh-en; three raters per segment),
against the span baselines, with settings chosen on the recipe's TED dev talks only.

1. dev: the recipe's own validation split (one whole TED talk per pair, rebuilt from its config), a seeded
   sample of it: the candidate fit and its decoding threshold are chosen there, and so are the
   BERTScore-alignment baseline's threshold and severity (mt tokens against the source through
   BERTScore-e5: the data has no references);
2. test (reporting only; nothing is chosen here): per language pair, character-level span F1 (severity
   ignored, and severity matching) with 95% bootstrap intervals for the recipe and the baselines (mark
   nothing, every word minor, BERTScore alignment), and segment Kendall with the MQM score for both fits.

    python benchmarks/error_spans.py --mqm ../wmt-mqm-human-evaluation --out runs/error-spans-bench
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import common  # noqa: F401  (offline environment first)
import numpy as np
import yaml

from lightning_metrics.baselines.bertscore import BERTScorer
from lightning_metrics.correlation import correlate_metrics
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.data.mqm import read_mqm
from lightning_metrics.evaluation.span_baselines import alignment_spans, choose_threshold, token_matches
from lightning_metrics.evaluation.spans import mark_every_word, mark_nothing, span_counts, span_scores
from lightning_metrics.metrics import load_metric

RECIPE = common.REPO / "configs" / "recipes" / "error-spans.yaml"
TEST_FILES = {
    "en-de": "generalMT2023/ende/sxs_mqm_generalMT2023_ende.3ratingsPerSegment.tsv",
    "zh-en": "generalMT2023/zhen/sxs_mqm_generalMT2023_zhen.3ratingsPerSegment.tsv",
}
GRID = np.round(np.arange(0.30, 0.951, 0.025), 3)
THRESHOLDS = (None, 0.1, 0.2, 0.3, 0.4, 0.5)
E5 = "multilingual-e5-small"


def dev_rows(mqm: Path) -> dict:
    """The recipe's validation rows, its data section rebuilt with the files under ``mqm``."""
    data = yaml.safe_load(RECIPE.read_text())["data"]["init_args"]
    for source in data["train"]:
        source["path"] = str(mqm / source["path"].split("wmt-mqm-human-evaluation/", 1)[1])
    module = RatingsDataModule(**data, encoder=E5, layout={"input_format": "segments", "text_fields": ["mt", "src"]})
    module.setup()
    return module.val_rows


def write_dev_sample(dev: dict, path: Path, per_pair: int, seed: int) -> Path:
    """A few dev rows per language pair (src, mt, system) as JSONL, for ``score --data ... --html``."""
    rng = np.random.default_rng(seed)
    lines = []
    for lp in sorted(set(dev["lp"])):
        rows = [i for i, x in enumerate(dev["lp"]) if x == lp and 40 < len(dev["mt"][i]) < 160]
        for i in sorted(rng.choice(rows, size=min(per_pair, len(rows)), replace=False)):
            lines.append(json.dumps({"src": dev["src"][i], "mt": dev["mt"][i], "system": lp.split(":")[-1]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def dev_sample(dev: dict, n: int, seed: int) -> dict:
    """A seeded sample of ``n`` dev rows: where the decoding thresholds and the candidate are chosen."""
    idx = np.random.default_rng(seed).choice(len(dev["mt"]), size=min(n, len(dev["mt"])), replace=False)
    return {k: [dev[k][i] for i in sorted(idx)] for k in ("mt", "src", "spans", "score", "lp")}


def choose_decoding(folder: str, dev: dict, max_length: int) -> dict:
    """The decoding threshold (None: the most probable tag) with the best dev span F1 (severity ignored,
    then matched) for the unified export at ``folder``."""
    metric = load_metric(folder, max_length=max_length)
    tried = []
    for threshold in THRESHOLDS:
        metric.model.decoding_threshold = threshold
        spans = metric.score(mt=dev["mt"], src=dev["src"]).extra["spans"]
        row = span_scores(span_counts(spans, dev["spans"], dev["mt"]), resamples=1).row()
        tried.append({"threshold": threshold, "f1": row["f1"], "f1_sev": row["f1_sev"]})
        print(f"dev {folder} threshold {threshold}: F1 {row['f1']:.4f}, severity {row['f1_sev']:.4f}")
    best = max(tried, key=lambda t: (t["f1"], t["f1_sev"]))
    return {"folder": folder, **best, "tried": tried}


def choose_alignment(scorer: BERTScorer, dev: dict) -> dict:
    matches = token_matches(scorer, dev["mt"], dev["src"])
    threshold, severity, f1 = choose_threshold(matches, dev["spans"], dev["mt"], GRID)
    return {"threshold": threshold, "severity": severity, "dev_f1": f1, "dev_rows": len(dev["mt"])}


def span_row(name: str, spans, rows: dict, seed: int) -> dict:
    scores = span_scores(span_counts(spans, rows["spans"], rows["mt"]), resamples=1000, seed=seed)
    return {"name": name, **scores.row()}


def test_pair(
    lp: str, path: Path, models: dict, scorer: BERTScorer, chosen: dict, seed: int, threshold, max_length
) -> dict:
    rows = read_mqm(str(path)).columns
    spans = {"mark nothing": mark_nothing(rows["mt"]), "every word minor": mark_every_word(rows["mt"])}
    matches = token_matches(scorer, rows["mt"], rows["src"])
    spans["BERTScore alignment"] = alignment_spans(matches, chosen["threshold"], chosen["severity"])
    sentence = {}
    for name, folder in models.items():
        start = time.perf_counter()
        metric = load_metric(folder, max_length=max_length)
        metric.model.decoding_threshold = threshold
        result = metric.score(mt=rows["mt"], src=rows["src"], progress=True)
        sentence[name] = result.scores
        print(f"{lp} {name}: {len(rows['mt'])} rows in {time.perf_counter() - start:.0f} s")
        if name == "error-spans":
            spans[name] = result.extra["spans"]
    sentence["BERTScore-e5 F1, mt against src"] = scorer.score(rows["mt"], rows["src"]).f1.tolist()
    kendall = correlate_metrics(sentence, rows["score"], None, rows["system"], bootstrap=1000, seed=seed)
    return {
        "rows": len(rows["mt"]),
        "annotated_chars": int(sum(s["end"] - s["start"] for row in rows["spans"] for s in row)),
        "spans": [span_row(name, value, rows, seed) for name, value in spans.items()],
        "kendall": {
            name: {
                "tau": c["all"].seg_kendall,
                "ci": list(c["all"].ci.get("seg_kendall", (np.nan, np.nan))),
                "sys_pearson": c["all"].sys_pearson,
            }
            for name, c in kendall.items()
        },
    }


def markdown(report: dict) -> str:
    model = report["model"]
    lines = [
        f"Chosen on TED dev: {model['folder']}, decoding threshold {model['threshold']} (dev F1 {model['f1']:.4f}); "
        f"alignment baseline threshold {report['alignment']['threshold']}, "
        f"{report['alignment']['severity']} (dev F1 {report['alignment']['dev_f1']:.4f})",
        "",
    ]
    for lp, part in report["test"].items():
        lines += [
            f"### {lp} ({part['rows']} rows)",
            "",
            "| spans | F1 [95% CI] | P | R | F1, severity matching [95% CI] |",
            "|---|---|---|---|---|",
        ]
        for r in part["spans"]:
            lines.append(
                f"| {r['name']} | {r['f1']:.4f} [{r['f1_low']:.4f}, {r['f1_high']:.4f}] | {r['precision']:.4f} "
                f"| {r['recall']:.4f} | {r['f1_sev']:.4f} [{r['f1_sev_low']:.4f}, {r['f1_sev_high']:.4f}] |"
            )
        lines += ["", "| model | segment Kendall [95% CI] | system Pearson |", "|---|---|---|"]
        for name, k in part["kendall"].items():
            lines.append(f"| {name} | {k['tau']:.4f} [{k['ci'][0]:.4f}, {k['ci'][1]:.4f}] | {k['sys_pearson']:.4f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mqm", type=Path, default=common.REPO.parent / "wmt-mqm-human-evaluation")
    p.add_argument("--model", nargs="+", default=["checkpoints/error-spans"], help="candidates, chosen on dev")
    p.add_argument("--dev-rows", type=int, default=500)
    p.add_argument("--max-length", type=int, default=512, help="tokens per sequence: generalMT2023 has paragraphs")
    p.add_argument("--sentence-only", default="checkpoints/error-spans-sentence-only")
    p.add_argument("--out", type=Path, default=Path("runs/error-spans-bench"))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    scorer = BERTScorer(E5)
    dev = dev_rows(args.mqm)
    write_dev_sample(dev, args.out / "dev_sample.jsonl", per_pair=4, seed=args.seed)
    sample = dev_sample(dev, args.dev_rows, args.seed)
    candidates = [choose_decoding(folder, sample, args.max_length) for folder in args.model]
    model = max(candidates, key=lambda c: (c["f1"], c["f1_sev"]))
    chosen = choose_alignment(scorer, sample)
    print(f"dev choice: {model['folder']} threshold {model['threshold']}; alignment {chosen}")
    models = {"error-spans": model["folder"], "sentence only (word_weight 0)": args.sentence_only}
    report = {"candidates": candidates, "model": model, "alignment": chosen, "bertscore": scorer.signature, "test": {}}
    for lp, name in TEST_FILES.items():
        report["test"][lp] = test_pair(
            lp, args.mqm / name, models, scorer, chosen, args.seed, model["threshold"], args.max_length
        )
    (args.out / "report.json").write_text(json.dumps(report, indent=1, default=float))
    (args.out / "report.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
