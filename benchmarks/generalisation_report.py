"""The out-of-distribution suite's report: correlations per test, the tables against the target,
the ablation and the plot (see ``generalisation.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from lightning_metrics.correlation import correlate_metrics
from lightning_metrics.storage.artifact import METADATA


def correlations(scores: dict[str, np.ndarray], rows: dict, bootstrap: int, seed: int) -> dict:
    result = correlate_metrics(
        scores, rows["score"], None, rows["system"], bootstrap=bootstrap, seed=seed, num_proc=os.cpu_count() or 1
    )
    return {
        m: {
            "kendall": c["all"].seg_kendall,
            "ci": list(c["all"].ci.get("seg_kendall", (np.nan, np.nan))),
            "sys_pearson": c["all"].sys_pearson,
            "n": c["all"].n,
            "n_sys": c["all"].n_systems,
        }
        for m, c in result.items()
    }


def report(results: dict, out: Path, times: dict, args, baselines: list[str], variants: list[str]) -> None:
    """``results.md`` (Kendall and system Pearson tables, the target, the ablation, wall times),
    ``results.json`` and ``plots/`` in ``out``."""
    from lightning_metrics.evaluation.plots import kendall_bars

    tests = list(results)
    ensembles = [m for m in results[tests[0]] if m.startswith("recipe + ")]
    metrics = [m for m in [*baselines, "recipe", *ensembles] if all(m in results[t] for t in tests)]

    def cell(r: dict) -> str:
        interval = f" [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]" if np.isfinite(r["ci"][0]) else ""
        return f"{r['kendall']:.4f}{interval}"

    lines = [
        f"# Out-of-distribution suite (`{args.recipe}`)",
        "",
        "Segment Kendall tau-b, 95% bootstrap CI "
        f"({args.bootstrap} resamples); system-level Pearson in the second table.",
        "",
        "| metric | " + " | ".join(f"{t} ({results[t][metrics[0]]['n']})" for t in tests) + " |",
        "|---" * (len(tests) + 1) + "|",
    ]
    lines += [f"| {m} | " + " | ".join(cell(results[t][m]) for t in tests) + " |" for m in metrics]
    lines += ["", "| metric | " + " | ".join(tests) + " |", "|---" * (len(tests) + 1) + "|"]
    lines += [
        f"| {m} | " + " | ".join(f"{results[t][m]['sys_pearson']:.3f} ({results[t][m]['n_sys']})" for t in tests) + " |"
        for m in metrics
    ]
    lines += target_lines(results, [m for m in metrics if m == "recipe" or m in ensembles])
    ablation = [v for v in results.get(args.ablation_test, {}) if v in variants]
    if len(ablation) > 1:
        r = results[args.ablation_test]
        lines += [
            "",
            f"Ablation on {args.ablation_test} (the recipe with one lever changed; dev = the model's best "
            "val_kendall):",
            "",
            "| variant | test Kendall | minus recipe | dev val_kendall |",
            "|---|---|---|---|",
        ]
        for v in ablation:
            dev = best_dev(out, args.ablation_test, v)
            lines.append(f"| {v} | {cell(r[v])} | {r[v]['kendall'] - r['recipe']['kendall']:+.4f} | {dev} |")
    lines += ["", "Wall times (this machine; cached stages are not re-run):", ""]
    lines += [f"- {k}: {v / 60:.1f} min" for k, v in times.items()]
    (out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=float) + "\n")
    kendall_bars(
        {m: {t: (results[t][m]["kendall"], *results[t][m]["ci"]) for t in tests} for m in metrics},
        out / "plots",
        "Segment Kendall on data the metric never saw",
    )
    print("\n".join(lines))


def target_lines(results: dict, candidates: list[str]) -> list[str]:
    """Each candidate's gap to the better BERTScore (target +0.02) and to chrF (+0.04) on every test."""
    lines = ["", "Target: >= the better BERTScore + 0.02 and >= chrF + 0.04 on every test.", ""] if candidates else []
    for m, t in ((m, t) for m in candidates for t in results):
        r = results[t]
        gap_b = r[m]["kendall"] - max(r[b]["kendall"] for b in r if b.startswith("BERTScore"))
        gap_c = r[m]["kendall"] - r["chrF"]["kendall"]
        verdict = "met" if gap_b >= 0.02 and gap_c >= 0.04 else "missed"
        lines.append(f"- {m}, {t}: {gap_b:+.4f} over the better BERTScore, {gap_c:+.4f} over chrF: **{verdict}**")
    return lines


def best_dev(out: Path, test: str, variant: str) -> str:
    found = sorted((out / "models").glob(f"{test}-{variant.replace(' ', '_')}-*/export/{METADATA}"))
    if not found:
        return "-"
    dev = json.loads(found[-1].read_text()).get("dev_correlations", {})
    return ", ".join(f"{v:.4f}" + ("" if k == "val_kendall" else f" ({k})") for k, v in dev.items()) or "-"
