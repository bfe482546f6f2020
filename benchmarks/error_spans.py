"""Error spans on data never trained on: the error-spans recipe (and its sentence-only twin, the same fit
with ``word_weight: 0``) on generalMT2023's side-by-side MQM (en-de, zh-en; three raters per segment),
against the span baselines, with settings chosen on the recipe's own dev split only.

1. dev: the recipe's validation split (whole documents, rebuilt from its config), a seeded sample of it:
   the candidate fit and its decoding threshold are chosen there, and so are the BERTScore-alignment
   baseline's threshold and severity (mt tokens against the source through BERTScore-e5); every word
   minor is scored there too, for comparison;
2. test (reporting only; nothing is chosen here): per language pair, character-level span F1 (severity
   ignored, WMT23's half credit with omissions, severity matching) with 95% intervals over whole
   documents for the recipe and the baselines (mark nothing, every word minor, every character minor,
   BERTScore alignment); segment Kendall with the MQM score for both fits, and the recipe's minus its
   twin's, paired over the same document draws. A recipe that reads references gets generalMT2023's
   human reference (``refA``, rated as a system) and is scored on the rows that have one, every
   baseline on the same rows.

    python benchmarks/error_spans.py --model checkpoints/error-spans \
        --sentence-only checkpoints/error-spans-sentence-only

Publishes ``docs/results/error-spans.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import time
from datetime import date
from pathlib import Path

import common  # noqa: F401  (offline environment first)
import numpy as np
import yaml
from results_doc import machine, publish

from lightning_metrics.baselines.bertscore import BERTScorer
from lightning_metrics.correlation import correlate_metrics
from lightning_metrics.data.modules import RatingsDataModule
from lightning_metrics.data.mqm import read_mqm
from lightning_metrics.evaluation.span_baselines import alignment_spans, choose_threshold, token_matches
from lightning_metrics.evaluation.spans import (
    mark_every_character,
    mark_every_word,
    mark_nothing,
    span_counts,
    span_scores,
)
from lightning_metrics.metrics import load_metric, metric_inputs

RECIPE = common.REPO / "configs" / "recipes" / "error-spans.yaml"
TEST_FILES = {
    "en-de": "generalMT2023/ende/sxs_mqm_generalMT2023_ende.3ratingsPerSegment.tsv",
    "zh-en": "generalMT2023/zhen/sxs_mqm_generalMT2023_zhen.3ratingsPerSegment.tsv",
}
GRID = np.round(np.arange(0.30, 0.951, 0.025), 3)
THRESHOLDS = (None, 0.1, 0.2, 0.3, 0.4, 0.5)
E5 = "multilingual-e5-small"


def dev_rows(recipe: Path, mqm: Path) -> dict:
    """The recipe's validation rows: its data section rebuilt, paths into wmt-mqm-human-evaluation read
    under ``mqm``, the others from the repository root (where ``fit`` ran)."""
    config = yaml.safe_load(recipe.read_text())
    data = config["data"]["init_args"]
    for source in data["train"]:
        path = source["path"]
        source["path"] = str(
            mqm / path.split("wmt-mqm-human-evaluation/", 1)[1] if "wmt-mqm-human-evaluation/" in path
            else common.REPO / path
        )  # fmt: skip
    fields = config["model"]["init_args"].get("segments", ["mt", "src"])
    module = RatingsDataModule(**data, encoder=E5, layout={"input_format": "segments", "text_fields": fields})
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
    return {k: [dev[k][i] for i in sorted(idx)] for k in dev if k in ("mt", "src", "ref", "spans", "score", "lp")}


def choose_decoding(folder: str, dev: dict, max_length: int) -> dict:
    """The decoding threshold (None: the most probable tag) with the best dev span F1 (severity ignored,
    then matched) for the unified export at ``folder``."""
    metric = load_metric(folder, max_length=max_length)
    tried = []
    for threshold in THRESHOLDS:
        metric.model.decoding_threshold = threshold
        spans = metric.score(**{f: dev[f] for f in metric.inputs}).extra["spans"]
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
    """One method's span F1 in every variant, intervals from 1,000 draws of whole documents."""
    counts = span_counts(spans, rows["spans"], rows["mt"])
    scores = span_scores(counts, resamples=1000, seed=seed, clusters=rows.get("doc_id"))
    return {"name": name, **scores.row()}


def test_rows(path: Path, out: Path) -> tuple[dict, dict]:
    """generalMT2023's rows (the ``.tsv``, or the repository's ``.tsv.tar.gz`` unpacked under ``out``) with a
    ``ref`` column where the human reference (system ``refA``, rated as a system) has the segment, and
    what the reader skipped."""
    if not path.exists() and Path(f"{path}.tar.gz").exists():
        with tarfile.open(f"{path}.tar.gz") as tar:
            tar.extractall(out, filter="data")
        path = next(out.rglob(path.name))
    table = read_mqm(str(path))
    rows = table.columns
    refs = {(d, s): t for d, s, t, m in zip(rows["doc_id"], rows["seg_id"], rows["mt"], rows["system"]) if m == "refA"}
    rows["ref"] = [refs.get((d, s)) for d, s in zip(rows["doc_id"], rows["seg_id"])]
    return rows, dict(table.skipped)


def scorable(rows: dict, inputs) -> dict:
    """The rows a metric reading ``inputs`` can score (with a reference, where it reads one)."""
    keep = [i for i in range(len(rows["mt"])) if all(rows[f][i] is not None for f in inputs)]
    return {k: [v[i] for i in keep] for k, v in rows.items()}


def test_pair(lp: str, rows: dict, models: dict, scorer: BERTScorer, chosen: dict, args, threshold) -> dict:
    """Span F1 (three variants, intervals over documents) of the recipe and the baselines, segment Kendall
    of every model, and the recipe's Kendall paired with its sentence-only twin's, on one pair's rows."""
    spans = {
        "mark nothing": mark_nothing(rows["mt"]),
        "every word minor": mark_every_word(rows["mt"]),
        "every character minor": mark_every_character(rows["mt"]),
    }
    matches = token_matches(scorer, rows["mt"], rows["src"])
    spans["BERTScore alignment"] = alignment_spans(matches, chosen["threshold"], chosen["severity"])
    sentence, truncated = {}, {}
    for name, folder in models.items():
        start = time.perf_counter()
        metric = load_metric(folder, max_length=args.max_length)
        metric.model.decoding_threshold = threshold
        result = metric.score(**{f: rows[f] for f in metric.inputs}, progress=True)
        sentence[name], truncated[name] = result.scores, result.truncated
        print(f"{lp} {name}: {len(rows['mt'])} rows in {time.perf_counter() - start:.0f} s")
        if name == "error-spans":
            spans[name] = result.extra["spans"]
    sentence["BERTScore-e5 F1, mt against src"] = scorer.score(rows["mt"], rows["src"]).f1.tolist()
    kendall = correlate_metrics(sentence, rows["score"], None, rows["system"], bootstrap=1000, seed=args.seed)
    paired = common.paired_kendall(
        sentence["error-spans"], sentence["sentence only (word_weight 0)"], rows["score"], 1000, args.seed,
        clusters=rows["doc_id"],
    )  # fmt: skip
    return {
        "rows": len(rows["mt"]),
        "documents": len(set(rows["doc_id"])),
        "annotated_chars": int(sum(s["end"] - s["start"] for row in rows["spans"] for s in row)),
        "truncated": truncated,
        "spans": [span_row(name, value, rows, args.seed) for name, value in spans.items()],
        "kendall": {
            name: {
                "tau": c["all"].seg_kendall,
                "ci": list(c["all"].ci.get("seg_kendall", (np.nan, np.nan))),
                "sys_pearson": c["all"].sys_pearson,
            }
            for name, c in kendall.items()
        },
        "token_head_change": paired,
    }


SPAN_COLUMNS = (("", "severity ignored"), ("_wmt23", "WMT23, half credit"), ("_sev", "severity must match"))


def span_table(part: dict) -> list[str]:
    head = " | ".join(f"F1, {title} [95% CI] | P | R" for _, title in SPAN_COLUMNS)
    lines = [f"| spans | {head} |", "|---" * (1 + 3 * len(SPAN_COLUMNS)) + "|"]
    for r in part["spans"]:
        cells = [
            f"{r['f1' + t]:.4f} [{r['f1' + t + '_low']:.4f}, {r['f1' + t + '_high']:.4f}] | {r['precision' + t]:.4f} "
            f"| {r['recall' + t]:.4f}"
            for t, _ in SPAN_COLUMNS
        ]
        lines.append(f"| {r['name']} | {' | '.join(cells)} |")
    return lines


def render(report: dict) -> str:
    """The page ``docs/results/error-spans.md``, from its JSON."""
    model, align = report["model"], report["alignment"]
    lines = [
        f"# Error spans on a later year's MQM: generalMT2023 ({report['date']})",
        "",
        f"Measured on {report['machine']}, fp32, seed {report['seed']}; generated by `benchmarks/error_spans.py` "
        "from the JSON beside this file:",
        "",
        f"```bash\n{report['command']}\n```",
        "",
        f"Chosen on the recipe's dev talks ({report['dev_rows']} rows): {model['folder']}, decoding threshold "
        f"{model['threshold']} (dev F1 {model['f1']:.4f}; every word minor {report['dev_every_word']['f1']:.4f}); "
        f"alignment baseline threshold {align['threshold']}, {align['severity']} (dev F1 {align['dev_f1']:.4f}). "
        "Span F1 is character-level and micro-averaged; intervals resample whole documents (1,000 draws).",
        "",
    ]
    for lp, part in report["test"].items():
        change = part["token_head_change"]
        lines += [f"## {lp}: {part['rows']} rows, {part['documents']} documents", "",
                  f"Skipped by the reader: {part['skipped'] or 'nothing'}; cut to {report['max_length']} tokens: "
                  + ", ".join(f"{n} {k}" for k, n in part["truncated"].items()) + ".", "", *span_table(part), "",
                  "| model | segment Kendall [95% CI] | system Pearson |", "|---|---|---|"]  # fmt: skip
        for name, k in part["kendall"].items():
            lines.append(f"| {name} | {k['tau']:.4f} [{k['ci'][0]:.4f}, {k['ci'][1]:.4f}] | {k['sys_pearson']:.4f} |")
        lines += ["", f"The token head's cost, paired over the same {change['resampled']}: error-spans minus its "
                  f"sentence-only twin {change['change']:+.4f} [{change['change_ci'][0]:+.4f}, "
                  f"{change['change_ci'][1]:+.4f}] segment Kendall.", ""]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mqm", type=Path, default=common.REPO.parent / "wmt-mqm-human-evaluation")
    p.add_argument("--recipe", type=Path, default=RECIPE, help="the recipe whose dev split makes the choices")
    p.add_argument("--model", nargs="+", default=["checkpoints/error-spans"], help="candidates, chosen on dev")
    p.add_argument("--dev-rows", type=int, default=500)
    p.add_argument("--max-length", type=int, default=512, help="tokens per sequence: generalMT2023 has paragraphs")
    p.add_argument("--sentence-only", default="checkpoints/error-spans-sentence-only")
    p.add_argument("--out", type=Path, default=Path("runs/error-spans-bench"))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    scorer = BERTScorer(E5)
    dev = dev_rows(args.recipe, args.mqm)
    write_dev_sample(dev, args.out / "dev_sample.jsonl", per_pair=4, seed=args.seed)
    sample = dev_sample(dev, args.dev_rows, args.seed)
    candidates = [choose_decoding(folder, sample, args.max_length) for folder in args.model]
    model = max(candidates, key=lambda c: (c["f1"], c["f1_sev"]))
    chosen = choose_alignment(scorer, sample)
    every_word = span_scores(span_counts(mark_every_word(sample["mt"]), sample["spans"], sample["mt"]), 1).row()
    print(f"dev choice: {model['folder']} threshold {model['threshold']}; alignment {chosen}")
    models = {"error-spans": model["folder"], "sentence only (word_weight 0)": args.sentence_only}
    inputs = {f for folder in models.values() for f in metric_inputs(folder)}  # metric.json alone
    report = {
        "date": date.today().isoformat(), "machine": machine(), "seed": args.seed, "max_length": args.max_length,
        "command": "python " + " ".join(["benchmarks/error_spans.py", *sys.argv[1:]]),
        "dev_rows": len(sample["mt"]), "dev_every_word": every_word, "candidates": candidates, "model": model,
        "alignment": chosen, "bertscore": scorer.signature, "test": {},
    }  # fmt: skip
    for lp, name in TEST_FILES.items():
        rows, skipped = test_rows(args.mqm / name, args.out)
        part = test_pair(lp, scorable(rows, inputs), models, scorer, chosen, args, model["threshold"])
        report["test"][lp] = {**part, "skipped": skipped}
    print(publish("error-spans", report, __file__).read_text())


if __name__ == "__main__":
    main()
