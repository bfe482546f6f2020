"""Scoring several systems at once, and printing the result: a table split by system."""

from __future__ import annotations

from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.base import Metric, ScoreResult


def score_systems(metric: Metric, systems: dict[str, list[str]], ref=None, src=None, **kwargs) -> dict[str, ScoreResult]:
    """Score several systems' outputs in one pass: ``{system: result}``.

    ``ref``/``src`` are one list shared by all systems, a ``{system: list}`` dict, or None.
    One call sees every system, so a learned metric embeds each shared source and reference
    once. Each system's score is the metric's own system score over its rows (corpus BLEU
    for BLEU). ``kwargs`` go to ``metric.score``.
    """
    def of(value, name):
        return value.get(name) if isinstance(value, dict) else value

    names = list(systems)
    refs, srcs = [of(ref, n) for n in names], [of(src, n) for n in names]
    for name, r, x in zip(names, refs, srcs):
        for kind, values in (("ref", r), ("src", x)):
            if values is not None and len(values) != len(systems[name]):
                raise LightningMetricsError(f"inputs differ in length: {len(systems[name])} lines in {name}, {len(values)} {kind} lines")
    joined = lambda parts: None if any(p is None for p in parts) else [t for p in parts for t in p]  # noqa: E731
    result = metric.score(mt=[t for n in names for t in systems[n]], ref=joined(refs), src=joined(srcs), **kwargs)
    out, start = {}, 0
    for name, r, x in zip(names, refs, srcs):
        scores = result.scores[start : start + len(systems[name])]
        start += len(scores)
        columns = metric.columns(systems[name], r, x)
        out[name] = ScoreResult(scores=scores, system_score=metric.system_score(scores, columns), signature=result.signature)
    return out


def systems_from_table(data) -> tuple[dict[str, list[str]], dict[str, list[str] | None], dict[str, list[str] | None]]:
    """Split a ratings table into per-system mt, ref and src lists (``system`` column, else one system).

    A table without ``ref`` (or ``src``) gives None for that field; whether the metric needs it
    is checked by the reader's ``required`` columns.
    """
    table = data.to_dict() if hasattr(data, "to_dict") else dict(data)
    n = len(table["mt"])
    systems = [str(s) for s in table.get("system", ["data"] * n)]
    split = {}
    for column in ("mt", "ref", "src"):
        values = table.get(column)
        per: dict[str, list[str]] = {}
        if values is not None:
            for name, value in zip(systems, values):
                per.setdefault(name, []).append(value)
        split[column] = per
    names = list(split["mt"])
    return split["mt"], {n: split["ref"].get(n) for n in names}, {n: split["src"].get(n) for n in names}


def format_scores(results: dict[str, ScoreResult], quiet: bool = False, only_system: bool = False) -> str:
    """COMET-style text: a line per segment (unless ``quiet``/``only_system``), a line per system."""
    lines = []
    for system, result in results.items():
        if not (quiet or only_system):
            lines += [f"{system}\tSegment {i}\tscore: {s:.4f}" for i, s in enumerate(result.scores)]
        lines.append(f"{system}\tscore: {result.system_score:.4f}")
    if results:
        lines.append(f"signature: {next(iter(results.values())).signature}")
    return "\n".join(lines)
