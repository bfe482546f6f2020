"""Parity of the WMT measures with google-research/mt-metrics-eval, on the WMT21 ratings of ../shared/data.

    .venv/bin/python benchmarks/meta_eval_parity.py PATH_TO_MT_METRICS_EVAL [--venv .venv-mtme] [--k 1000]

``PATH_TO_MT_METRICS_EVAL`` is a clone or a snapshot (a git folder) of the reference implementation; it is
installed, with numpy and scipy, into its own venv (``--venv``, made once), as the unbabel-comet peer
lives in ``.venv-comet``. For each language pair of ``wmt21_mqm_newstest.csv`` and ``wmt21_da_toen.csv``
both sides compute, on the same sentence chrF and BLEU scores: acc_eq grouped by item and over all pairs
(a seeded 5% of them, drawn by both as mt-metrics-eval draws), each with its ε; Kendall tau-b over all
rows and averaged by item; acc23 at ε = 0 by item; SPA (MQM, whose matrices are complete); system pairwise
accuracy; and the pairs permutation test's p-value for chrF over BLEU (``--k`` draws, different random
streams: compared against the test's own sampling error). Writes ``docs/results/meta-eval-parity.json``
and the ``.md`` table generated from it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
from results_doc import machine, publish

from lightning_metrics.correlation import kendall
from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.evaluation.pairwise import (
    accuracy_at,
    groups_of,
    pairs_permutation_test,
    soft_pairwise_accuracy,
    system_pairwise_accuracy,
    tie_calibrated_accuracy,
)
from lightning_metrics.evaluation.protocol import system_matrix, system_means
from lightning_metrics.metrics import score_many

REPO = common.REPO
FILES = {"MQM newstest": common.NEWS, "DA": common.DA}
SAMPLE_RATE, SEED, PERM_SEED = 0.05, 7, 11
DETERMINISTIC = ("acc_eq_item", "epsilon_item", "acc_eq_none", "epsilon_none", "kendall_b", "kendall_b_item",
                 "acc23_eps0_item", "spa", "sys_accuracy")  # fmt: skip


def peer_venv(path: Path, venv: Path) -> Path:
    """The reference implementation from ``path`` in ``venv`` (made once); its python."""
    python = venv / "bin" / "python"
    if not (venv / ".mtme-installed").is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "numpy", "scipy", "absl-py"], check=True)
        with tempfile.TemporaryDirectory() as tmp:
            source = path
            if not (path / "setup.py").is_file():  # a git folder without a work tree: its files at HEAD
                archive = subprocess.run(
                    ["git", f"--git-dir={path}", "archive", "HEAD"], check=True, capture_output=True
                )
                subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
                source = Path(tmp)
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(source)], check=True)
        (venv / ".mtme-installed").write_text(str(path) + "\n")
    return python


def matrices(rows: dict, scores: dict[str, np.ndarray]) -> dict:
    """The test set as mt-metrics-eval packs it: systems x items, flattened system by system, null if unrated."""
    systems, items = sorted(set(rows["system"])), sorted(set(rows["seg_id"]), key=str)
    index = {(s, i): k for k, (s, i) in enumerate(zip(rows["system"], rows["seg_id"]))}

    def pack(values) -> list:
        return [None if (s, i) not in index else float(values[index[(s, i)]]) for s in systems for i in items]

    complete = all((s, i) in index for s in systems for i in items)
    return {
        "num_sys": len(systems), "num_items": len(items), "human": pack(rows["score"]), "complete": complete,
        "metrics": {name: pack(v) for name, v in scores.items()}, "sample_rate": SAMPLE_RATE, "seed": SEED,
        "k": 0, "perm_seed": PERM_SEED,
    }  # fmt: skip


def ours(test: dict, k: int) -> dict:
    """The same measures by lightning-metrics, on the packed rows (None dropped, in mt-metrics-eval's order)."""
    n_items = test["num_items"]
    keep = [j for j, h in enumerate(test["human"]) if h is not None]
    human = np.array([test["human"][j] for j in keep])
    items, systems = [j % n_items for j in keep], [j // n_items for j in keep]
    by_item = groups_of(len(keep), "item", items=items)
    out = {}
    for name, metric in test["metrics"].items():
        m = np.array([metric[j] for j in keep])
        item, everything = (
            tie_calibrated_accuracy(human, m, by_item),
            tie_calibrated_accuracy(human, m, None, SAMPLE_RATE, SEED),
        )
        per_item = [kendall(m[g], human[g]) for g in by_item if len(g) > 1]
        row = {
            "acc_eq_item": item.accuracy, "epsilon_item": item.epsilon, "acc_eq_none": everything.accuracy,
            "epsilon_none": everything.epsilon, "kendall_b": kendall(m, human),
            "kendall_b_item": float(np.mean([v for v in per_item if np.isfinite(v)])),
            "acc23_eps0_item": accuracy_at(human, m, 0.0, by_item),
            "sys_accuracy": system_pairwise_accuracy(system_means(human, systems), system_means(m, systems)),
        }  # fmt: skip
        if test["complete"]:
            row["spa"] = soft_pairwise_accuracy(
                system_matrix(human, systems, items)[0], system_matrix(m, systems, items)[0]
            )
        out[name] = row
    better, worse = list(test["metrics"])[:2]
    a, b = (np.array([test["metrics"][n][j] for j in keep]) for n in (worse, better))
    p, delta, used = pairs_permutation_test(human, a, b, by_item, k, PERM_SEED)
    out["_permutation"] = {"p": p, "delta": delta, "k": used}
    return out


def compare(mine: dict, theirs: dict) -> dict:
    rows = {}
    for metric, values in theirs.items():
        if metric.startswith("_"):
            continue
        for measure in DETERMINISTIC:
            if measure in values:
                rows[f"{metric} {measure}"] = {"ours": mine[metric][measure], "theirs": values[measure],
                                               "diff": abs(mine[metric][measure] - values[measure])}  # fmt: skip
    a, b = mine["_permutation"], theirs["_permutation"]
    error = 2 * np.sqrt(max(b["p"] * (1 - b["p"]), 1 / b["k"]) / min(a["k"], b["k"]))
    rows["permutation p (chrF over BLEU)"] = {"ours": a["p"], "theirs": b["p"], "diff": abs(a["p"] - b["p"]),
                                              "sampling_error": float(error)}  # fmt: skip
    return rows


def tests(k: int) -> dict:
    out = {}
    for label, path in FILES.items():
        table = read_rating_table(str(path), required=("mt", "ref", "score"), on_invalid="skip")
        for lp in sorted(set(table["lp"])):
            rows = {
                c: [v for v, x in zip(table[c], table["lp"]) if x == lp]
                for c in ("mt", "ref", "score", "system", "seg_id")
            }
            scores = score_many(["chrf", "bleu"], rows["mt"], rows["ref"], num_proc=common.os.cpu_count() or 1)
            out[f"{label} {lp}"] = {**matrices(rows, {"chrF": scores["chrf"], "BLEU": scores["bleu"]}), "k": k}
    return out


def render(report: dict) -> str:
    lines = [
        f"# Meta-evaluation parity with mt-metrics-eval ({report['date']})",
        "",
        f"Generated by `benchmarks/meta_eval_parity.py` from the JSON beside this file; mt-metrics-eval at "
        f"commit `{report['reference_commit']}`, on {report['machine']}:",
        "",
        f"```bash\n{report['command']}\n```",
        "",
        f"Largest difference over every deterministic measure and test set: **{report['max_diff']:.1e}**. "
        f"Permutation p-values (different random streams): largest difference {report['max_p_diff']:.3f}, "
        f"each within twice its sampling error: {'yes' if report['p_within'] else 'no'}.",
        "",
        "| test set | measure | lightning-metrics | mt-metrics-eval | difference |",
        "|---|---|---|---|---|",
    ]
    for name, rows in report["tests"].items():
        for measure, r in rows.items():
            lines.append(f"| {name} | {measure} | {r['ours']:.10g} | {r['theirs']:.10g} | {r['diff']:.1e} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", type=Path, help="mt-metrics-eval: a clone, or a git folder of a snapshot")
    parser.add_argument("--venv", type=Path, default=REPO / ".venv-mtme")
    parser.add_argument("--k", type=int, default=1000, help="permutation draws")
    args = parser.parse_args()
    python = peer_venv(args.reference.resolve(), args.venv)
    data = tests(args.k)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f)
    theirs = common.run_peer("mtme_peer.py", [f.name], python=str(python))
    report_tests = {name: compare(ours(test, args.k), theirs[name]) for name, test in data.items()}
    git_dir = args.reference if (args.reference / "HEAD").is_file() else args.reference / ".git"
    commit = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", "HEAD"], capture_output=True, text=True)
    deterministic = [r["diff"] for rows in report_tests.values() for m, r in rows.items() if "sampling_error" not in r]
    permutation = [r for rows in report_tests.values() for r in rows.values() if "sampling_error" in r]
    report = {
        "date": date.today().isoformat(), "machine": machine(), "reference_commit": commit.stdout.strip()[:12],
        "command": f"python benchmarks/meta_eval_parity.py {args.reference} --k {args.k}",
        "max_diff": max(deterministic), "max_p_diff": max(r["diff"] for r in permutation),
        "p_within": all(r["diff"] <= r["sampling_error"] for r in permutation), "tests": report_tests,
    }  # fmt: skip
    publish("meta-eval-parity", report, __file__)
    print(render(report))


if __name__ == "__main__":
    main()
