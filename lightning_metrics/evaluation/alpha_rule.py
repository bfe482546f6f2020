"""The dev rule for an interpolation's alpha, stated before any run: among the grid's mixes of START
and TUNED, the one with the best in-house dev Kendall whose general dev Kendall stays within
``tolerance`` of START's (a tie goes to the smaller alpha: the mix nearer the start). ``alpha = 0``
(START itself) is always on the grid, so there is always a choice.

``lightning-metrics interpolate START TUNED --dev IN_HOUSE_DEV --general-dev GENERAL_DEV --out DIR``
runs it; ``benchmarks/in_house.py`` applies :func:`pick_alpha` to its cached scores.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from lightning_metrics.correlation import kendall
from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.metrics.interpolation import interpolate_exports
from lightning_metrics.metrics.loading import load_metric, metric_inputs

GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
TOLERANCE = 0.005


@dataclass
class AlphaStep:
    """One mix on the grid: its alpha, segment Kendall on both dev sets, and whether the rule keeps it."""

    alpha: float
    in_house: float
    general: float
    kept: bool = False


def within_tolerance(general: float, start_general: float, tolerance: float = TOLERANCE) -> bool:
    """Whether general dev Kendall ``general`` stays within ``tolerance`` of the start's: the rule's guard."""
    return general >= start_general - tolerance


def pick_alpha(steps: list[AlphaStep], tolerance: float = TOLERANCE) -> AlphaStep:
    """The rule on measured steps (one of them at ``alpha = 0``); marks the kept ones."""
    start = next(s for s in steps if s.alpha == 0.0)
    for step in steps:
        step.kept = within_tolerance(step.general, start.general, tolerance)
    return max((s for s in steps if s.kept), key=lambda s: (s.in_house, -s.alpha))


def choose_alpha(
    start: str | Path,
    tuned: str | Path,
    dev: str | Path,
    general_dev: str | Path,
    grid: tuple[float, ...] = GRID,
    tolerance: float = TOLERANCE,
    **score,
) -> tuple[AlphaStep, list[AlphaStep]]:
    """Score every mix on the grid (and both parents) on the two dev rating files; returns the chosen
    step and all of them. ``score`` goes to each metric's ``score`` (``options``, ``progress``)."""
    needs = ("mt", "score", *sorted(set(metric_inputs(str(start))) - {"mt"}))
    tables = {name: read_rating_table(path, required=needs) for name, path in (("dev", dev), ("general", general_dev))}
    steps = []
    with tempfile.TemporaryDirectory(prefix="lm-alpha-") as tmp:
        for alpha in sorted({0.0, 1.0, *map(float, grid)}):
            folder = {0.0: start, 1.0: tuned}.get(alpha)
            if folder is None:
                folder = interpolate_exports(start, tuned, alpha, Path(tmp) / f"alpha-{alpha}")
            metric = load_metric(str(folder))
            values = {}
            for name, table in tables.items():
                scores = metric.score(**{k: table[k] for k in needs if k != "score"}, **score).scores
                values[name] = float(kendall(scores, table["score"]))
            steps.append(AlphaStep(alpha, values["dev"], values["general"]))
    return pick_alpha(steps, tolerance), steps


def format_steps(steps: list[AlphaStep], chosen: AlphaStep) -> str:
    """The grid as a table: alpha, both dev Kendalls, kept by the rule, the choice marked."""
    lines = ["alpha  in-house dev  general dev  within tolerance"]
    for s in steps:
        mark = "  <- chosen" if s is chosen else ""
        lines.append(f"{s.alpha:5.2f}  {s.in_house:12.4f}  {s.general:11.4f}  {'yes' if s.kept else 'no':>16}{mark}")
    return "\n".join(lines)


def as_record(chosen: AlphaStep, steps: list[AlphaStep], dev, general_dev, tolerance: float) -> dict:
    """What an export made by the rule records about its choice."""
    return {
        "dev": str(dev),
        "general_dev": str(general_dev),
        "tolerance": tolerance,
        "steps": [asdict(s) for s in steps],
        "alpha": chosen.alpha,
    }
