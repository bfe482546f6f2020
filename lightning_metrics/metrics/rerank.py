"""`rerank`: for each source, choose the best of N candidates with any metric.

- ``qe``: a reference-free metric (an exported ``CometReferenceless``) scores each candidate
  against its source;
- ``mbr``: minimum Bayes risk, as ``comet-mbr`` does it: each candidate is scored against every
  other candidate of its source as a pseudo-reference, and its utility is the mean of those N-1
  scores;
- ``ref``: against a real reference (an oracle, for analysis).

All (candidate, pseudo-reference) pairs go to the metric in one call, so a learned sentence
model embeds each unique candidate once. Candidates come as a file with N consecutive lines per
source (``--num-candidates N``) or a table with a ``source_id`` column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.metrics.base import Metric

MODES = ("qe", "mbr", "ref")


@dataclass
class Choice:
    """The chosen candidate of one source: its position among the source's candidates, text and score."""

    source: int
    index: int
    text: str
    score: float


def group_lines(lines: list[str], n: int, path: str) -> list[list[str]]:
    """Consecutive groups of ``n`` candidates (an error naming the file when the count does not divide)."""
    if n < 1:
        raise InputError(path, f"--num-candidates must be at least 1, got {n}")
    if len(lines) % n:
        raise InputError(path, f"{len(lines)} lines is not a whole number of sources with {n} candidates each")
    return [lines[i : i + n] for i in range(0, len(lines), n)]


def group_table(table: dict[str, list], path: str) -> tuple[list[list[str]], list[str] | None, list[str] | None]:
    """Candidates, sources and references per ``source_id`` (in order of appearance); every source
    must have the same number of candidates (an error naming the file, the row and the id)."""
    if "source_id" not in table:
        raise InputError(path, "a candidates table needs a source_id column (or give -t FILE --num-candidates N)")
    order: dict[str, list[int]] = {}
    for i, key in enumerate(table["source_id"]):
        order.setdefault(str(key), []).append(i)
    counts = {k: len(v) for k, v in order.items()}
    first = next(iter(counts.values()))
    for key, rows in order.items():
        if counts[key] != first:
            raise InputError(
                path, f"source_id {key!r} has {counts[key]} candidates, the first source has {first}", row=rows[0] + 2
            )
    groups = [[table["mt"][i] for i in rows] for rows in order.values()]
    pick = lambda column: [table[column][rows[0]] for rows in order.values()] if column in table else None  # noqa: E731
    return groups, pick("src"), pick("ref")


def rerank(
    metric: Metric,
    candidates: list[list[str]],
    src: list[str] | None = None,
    ref: list[str] | None = None,
    mode: str | None = None,
    options: ScoreOptions | None = None,
) -> list[Choice]:
    """The best candidate per source under ``mode`` (default: ``qe`` for reference-free metrics,
    ``ref`` when references are given, else ``mbr``), every pair scored in one call run as ``options`` say."""
    mode = mode or ("qe" if not metric.needs_ref else "ref" if ref is not None else "mbr")
    if mode not in MODES:
        raise LightningMetricsError(f"rerank mode must be one of {MODES}, got {mode!r}")
    for name, values in (("sources", src), ("references", ref)):
        if values is not None and len(values) != len(candidates):
            raise LightningMetricsError(f"{len(candidates)} sources of candidates but {len(values)} {name}")
    if mode == "qe" and metric.needs_ref:
        raise LightningMetricsError(
            f"{metric.name} reads references: use --mode mbr (candidates as pseudo-references) or give -r"
        )
    if metric.needs_src and src is None:
        raise LightningMetricsError(f"{metric.name} reads sources: give -s SOURCE_FILE")
    if mode == "ref" and ref is None:
        raise LightningMetricsError("--mode ref needs references (-r FILE)")
    if mode == "mbr" and any(len(g) < 2 for g in candidates):
        raise LightningMetricsError("minimum Bayes risk needs at least 2 candidates per source")
    owner, mt, refs = [], [], []
    for s, group in enumerate(candidates):
        for i, hyp in enumerate(group):
            pseudo = (
                [group[j] for j in range(len(group)) if j != i]
                if mode == "mbr"
                else [ref[s] if mode == "ref" else None]
            )
            for r in pseudo:
                owner.append((s, i))
                mt.append(hyp)
                refs.append(r)
    sources = [src[s] for s, _ in owner] if src is not None else None
    scores = metric.score(mt=mt, ref=refs if metric.needs_ref else None, src=sources, options=options).scores
    utility: dict[tuple[int, int], list[float]] = {}
    for key, value in zip(owner, scores):
        utility.setdefault(key, []).append(value)
    out = []
    for s, group in enumerate(candidates):
        means = [float(np.mean(utility[(s, i)])) for i in range(len(group))]
        best = int(np.argmax(means) if metric.higher_is_better else np.argmin(means))  # MetricX: the lowest
        out.append(Choice(s, best, group[best], means[best]))
    return out
