"""The cross-year suite's report (see ``cross_year.py``): Kendall on WMT22 uk-en (dev) and ja-en (test)
beside the baselines, the learned part's contribution over BERTScore-e5, the dev choice, the
trajectory and the soups, and the diagnostics (Kendall within one source's translations)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lightning_metrics.correlation import kendall

TRAJECTORY_DEV = ("val_kendall", "val_kendall/da", "val_kendall/mqm-news", "val_kendall/mqm-ted")
TARGETS = {"BERTScore-e5": 0.02, "chrF": 0.04}  # the best shipped metric on ja-en must beat each by this


def interval(ci) -> str:
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def cell(r: dict) -> str:
    return f"{r['kendall']:.4f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"


def within_source_kendall(scores: np.ndarray, human, sources) -> float:
    """Kendall's tau-a over the pairs of translations of one source only (concordant minus discordant
    pairs over all such pairs, pooled over sources): how well a metric ranks the systems' outputs of a
    segment, apart from how it places one segment against another."""
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(sources):
        groups.setdefault(s, []).append(i)
    human = np.asarray(human, dtype=float)
    agree = pairs = 0.0
    for idx in groups.values():
        if len(idx) < 2:
            continue
        m, h = scores[idx], human[idx]
        sign = np.sign(m[:, None] - m[None, :]) * np.sign(h[:, None] - h[None, :])
        upper = np.triu_indices(len(idx), 1)
        agree += sign[upper].sum()
        pairs += len(upper[0])
    return float(agree / pairs) if pairs else float("nan")


def diagnostics(scores: dict[str, np.ndarray], rows: dict) -> dict:
    """Per metric: Kendall over all rows, within one source's translations, and against the raw 0-100 DA."""
    raw = np.asarray(rows["raw"], dtype=float)
    return {
        m: {
            "all": float(kendall(v, rows["score"])),
            "within source": within_source_kendall(v, rows["score"], rows["src"]),
            "raw": float(kendall(v, raw)),
        }
        for m, v in scores.items()
    }


def report(state: dict, out: Path, command: str) -> list[str]:
    """``results.md`` from the suite's state; returns its lines."""
    dev, test = state["correlations"]["uk-en"], state["correlations"]["ja-en"]
    metrics = list(test)
    lines = [
        "# Cross-year suite: trained on WMT21, scored on WMT22",
        "",
        f"`{command}`",
        "",
        "Segment Kendall tau-b with 95% bootstrap intervals (1000 resamples of segments); uk-en is the dev set "
        "(every choice), ja-en the test (reported only).",
        "",
        f"| metric | uk-en dev ({dev[metrics[0]]['n']}) | ja-en test ({test[metrics[0]]['n']}) "
        "| ja-en system Pearson |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {m} | {cell(dev[m])} | {cell(test[m])} | {test[m]['sys_pearson']:.3f} ({test[m]['n_sys']}) |"
        for m in metrics
    ]
    lines += ["", "The learned part's contribution (paired bootstrap over segments, 95%):", ""]
    lines += ["| comparison | uk-en dev | ja-en test |", "|---|---|---|"]
    for name, gains in state["gains"].items():
        d, t = gains["uk-en"], gains["ja-en"]
        lines.append(f"| {name} | {d['gain']:+.4f} {interval(d['ci'])} | {t['gain']:+.4f} {interval(t['ci'])} |")
    chosen = state.get("chosen")
    if chosen:
        lines += ["", f"Chosen on uk-en dev: **{chosen}**.", ""]
        for base, margin in TARGETS.items():
            gap = test[chosen]["kendall"] - test[base]["kendall"]
            verdict = "met" if gap >= margin else "missed"
            lines.append(f"- ja-en: {gap:+.4f} over {base} (target +{margin}): **{verdict}**")
    lines += trajectory_lines(state.get("trajectory", {}))
    lines += diagnostic_lines(state.get("diagnostics", {}))
    lines += ["", "Wall times (this machine; cached stages are not re-run):", ""]
    lines += [f"- {k}: {v / 60:.1f} min" for k, v in state.get("times", {}).items()]
    (out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


def trajectory_lines(trajectories: dict) -> list[str]:
    lines = []
    for variant, t in trajectories.items():
        columns = [*TRAJECTORY_DEV, "uk-en sample", "agreement with BERTScore"]
        lines += [
            "",
            f"Trajectory of {variant}: WMT21 dev Kendall as logged (all sources, DA, MQM newstest, MQM TED), the "
            "uk-en sample's, and the Kendall between the model's scores and BERTScore's (MiniLM, its own signal) "
            "on that sample:",
            "",
        ]
        lines += ["| step | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        for step, row in sorted(t["steps"].items(), key=lambda kv: int(kv[0])):
            values = [f"{row[c]:.4f}" if c in row else "-" for c in columns]
            lines.append(f"| {step} | " + " | ".join(values) + " |")
        if t["soups"]:
            lines += ["", f"Soups of {variant} (uniform averages of the checkpoints from a step on), uk-en sample:", ""]
            lines += [f"- from step {s}: {k:.4f}" for s, k in t["soups"].items()]
    return lines


def diagnostic_lines(diagnostics: dict) -> list[str]:
    if not diagnostics:
        return []
    lines = [
        "",
        "Diagnostics on uk-en dev: Kendall over all rows, within one source's translations (tau-a over "
        "the pairs of outputs of one source), and against the raw 0-100 scores:",
        "",
        "| metric | all | within source | raw |",
        "|---|---|---|---|",
    ]
    lines += [f"| {m} | {d['all']:.4f} | {d['within source']:.4f} | {d['raw']:.4f} |" for m, d in diagnostics.items()]
    return lines
