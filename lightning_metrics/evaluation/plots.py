"""Figures: metric-vs-human scatter plots, Kendall bars with confidence intervals, training curves.

matplotlib with the non-interactive Agg backend; every function writes PNG files and returns
their paths. Files are written to a temporary name and renamed, like every other output.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from lightning_metrics.atomic import atomic_path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3, "font.size": 9})
    return plt


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, bbox_inches="tight")
    return path


def scatter_plots(
    scores: dict[str, Sequence[float]],
    human: Sequence[float],
    groups: Sequence[str] | None,
    out: str | Path,
    max_points: int = 4000,
    seed: int = 0,
) -> list[Path]:
    """One PNG per group (e.g. language pair): a panel per metric, metric score against human score."""
    plt = _pyplot()
    h = np.asarray(human, dtype=float)
    g = np.asarray(groups if groups is not None else ["all"] * len(h), dtype=object).astype(str)
    rng = np.random.default_rng(seed)
    paths = []
    for name in sorted(set(g)):
        idx = np.flatnonzero(g == name)
        if len(idx) > max_points:
            idx = np.sort(rng.choice(idx, max_points, replace=False))
        n = len(scores)
        fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.0), squeeze=False)
        for ax, (metric, values) in zip(axes[0], scores.items()):
            m = np.asarray(values, dtype=float)[idx]
            ax.scatter(h[idx], m, s=4, alpha=0.35, linewidths=0)
            ax.set_title(metric)
            ax.set_xlabel("human score")
        axes[0][0].set_ylabel("metric score")
        fig.suptitle(f"{name}: {len(idx)} segments" + (" (sample)" if len(idx) == max_points else ""))
        paths.append(_save(fig, Path(out) / f"scatter_{name}.png"))
        plt.close(fig)
    return paths


def kendall_bars(
    table: dict[str, dict[str, tuple[float, float, float]]], out: str | Path, title: str = "Segment Kendall tau"
) -> Path:
    """Grouped bars: ``table[metric][group] = (tau, ci_low, ci_high)``; error bars show the CI."""
    plt = _pyplot()
    metrics = list(table)
    groups = sorted({g for by_group in table.values() for g in by_group})
    width = 0.8 / max(1, len(metrics))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(groups) * max(1, len(metrics)) * 0.6), 3.4))
    x = np.arange(len(groups))
    for i, metric in enumerate(metrics):
        vals = [table[metric].get(g, (math.nan, math.nan, math.nan)) for g in groups]
        tau = np.array([v[0] for v in vals])
        xs = x + (i - (len(metrics) - 1) / 2) * width
        ax.bar(xs, tau, width, label=metric)
        has_ci = np.array(
            [math.isfinite(v[1]) and math.isfinite(v[2]) for v in vals]
        )  # no whisker where no CI (e.g. avg)
        if has_ci.any():
            low = np.array([v[0] - v[1] for v in vals])[has_ci]
            high = np.array([v[2] - v[0] for v in vals])[has_ci]
            ax.errorbar(xs[has_ci], tau[has_ci], yerr=[low, high], fmt="none", ecolor="black", capsize=2, linewidth=1)
    ax.set_xticks(x, groups)
    ax.set_ylabel("Kendall tau")
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=min(4, len(metrics)), loc="upper left", bbox_to_anchor=(0, -0.12))
    path = _save(fig, Path(out) / "kendall.png")
    plt.close(fig)
    return path


def read_metrics_csv(path: str | Path) -> dict[str, list[tuple[float, float]]]:
    """``{column: [(step, value), ...]}`` from a Lightning ``CSVLogger`` ``metrics.csv``."""
    series: dict[str, list[tuple[float, float]]] = {}
    with Path(path).open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            step = row.get("step")
            if not step:
                continue
            for key, value in row.items():
                if key in ("step", "epoch") or value in ("", None):
                    continue
                series.setdefault(key, []).append((float(step), float(value)))
    return series


def training_curves(run_dir: str | Path, out: str | Path | None = None) -> list[Path]:
    """For each ``metrics.csv`` under ``run_dir``: one PNG with loss, validation correlations and learning rates."""
    from lightning_metrics.errors import InputError

    files = sorted(Path(run_dir).rglob("metrics.csv"))
    if not files:
        raise InputError(str(run_dir), "no metrics.csv under this folder (train with a CSVLogger)")
    plt = _pyplot()
    paths = []
    for file in files:
        series = read_metrics_csv(file)
        panels = [
            ("loss", [k for k in series if "loss" in k or k.startswith("train_mse")]),
            ("validation", [k for k in series if k.startswith("val_")]),
            ("learning rate", [k for k in series if k.startswith("lr")]),
        ]
        panels = [(t, ks) for t, ks in panels if ks]
        if not panels:
            continue
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.2), squeeze=False)
        for ax, (title, keys) in zip(axes[0], panels):
            for key in sorted(keys)[:10]:
                steps, values = zip(*series[key])
                ax.plot(steps, values, marker="o" if len(steps) < 30 else None, markersize=3, label=key, linewidth=1)
            ax.set_title(title)
            ax.set_xlabel("step")
            ax.legend(fontsize=7)
        fig.suptitle(str(file.parent.relative_to(run_dir)) if file.parent != Path(run_dir) else Path(run_dir).name)
        target = Path(out or file.parent) / (
            "curves.png" if out is None else f"curves_{'_'.join(file.parent.relative_to(run_dir).parts) or 'run'}.png"
        )
        paths.append(_save(fig, target))
        plt.close(fig)
    return paths
