"""Scoring with a metric by name: ``load_metric(name).score(mt=..., ref=...)``.

Every metric returns the same :class:`ScoreResult`: segment scores in input order, the system
score (the mean of the segments), and a signature that says how the numbers were made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from lightning_metrics import __version__
from lightning_metrics.baselines import baseline_names, baseline_scores
from lightning_metrics.errors import InputError, LightningMetricsError


@dataclass
class ScoreResult:
    """Segment scores (input order), their mean as the system score, and the signature."""

    scores: list[float]
    system_score: float
    signature: str
    extra: dict = field(default_factory=dict)


class BaselineMetric:
    """A built-in metric (BLEU, chrF, ROUGE, BERTScore) behind the common scoring interface."""

    needs_src = False
    needs_ref = True

    def __init__(self, name: str, **options):
        if name not in baseline_names():
            raise LightningMetricsError(f"unknown metric {name!r}; built-in metrics are {baseline_names()}")
        self.name, self.options = name, options

    @property
    def signature(self) -> str:
        if self.name in ("bleu", "chrf"):
            import sacrebleu

            settings = "tok:13a|smooth:exp|eff:yes" if self.name == "bleu" else "nc:6|nw:0|space:no"
            detail = f"{self.name}|nrefs:1|case:mixed|{settings}|sacrebleu:{sacrebleu.__version__}"
        elif self.name.startswith("rouge"):
            detail = f"{self.name}|stemmer:no|fmeasure"
        else:
            bs = self.options.get("bertscore", {})
            detail = f"{self.name}|model:{bs.get('model', 'default')}|layer:{bs.get('layer') or 'default'}"
        return f"{detail}|lightning-metrics:{__version__}"

    def score(
        self,
        mt: Sequence[str],
        ref: Sequence[str] | None = None,
        src: Sequence[str] | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        devices: int = 1,
        progress: bool | None = None,
    ) -> ScoreResult:
        """Score candidates ``mt`` against references ``ref`` (``src`` is accepted and unused).

        Same signature as a learned metric's; built-in metrics run on one device (``devices`` is
        accepted for that reason), BERTScore on ``device``. ``progress``: BERTScore's bar (None: from
        2,000 pairs on); the lexical metrics have none.
        """
        if ref is None:
            raise LightningMetricsError(f"{self.name} needs references (ref=...)")
        if len(mt) != len(ref) or (src is not None and len(src) != len(mt)):
            counts = f"{len(mt)} mt, {len(ref)} ref" + ("" if src is None else f", {len(src)} src")
            raise LightningMetricsError(f"inputs differ in length: {counts}")
        options = dict(self.options)
        if self.name.startswith("bertscore"):
            options["bertscore"] = {**options.get("bertscore", {}), "batch_size": batch_size, "device": device, "progress": progress}
        values = baseline_scores([self.name], list(mt), list(ref), **options)[self.name]
        return ScoreResult(scores=list(values), system_score=float(np.mean(values)) if values else float("nan"), signature=self.signature)


def load_metric(name_or_path: str, **options):
    """A metric by folder or name.

    A folder written by ``lightning-metrics export`` loads as a
    :class:`~lightning_metrics.scorer.LearnedMetric`. Names:
    ``bleu``, ``chrf``, ``rouge1``/``rouge2``/``rougeL``, ``bertscore`` (F1), ``bertscore_p``,
    ``bertscore_r``; ``options`` go to those (for BERTScore: ``bertscore={"model": ...}``).
    """
    if Path(str(name_or_path)).is_dir():
        from lightning_metrics.scorer import LearnedMetric

        return LearnedMetric(name_or_path)
    if str(name_or_path) not in baseline_names():
        raise LightningMetricsError(f"unknown metric {str(name_or_path)!r}: not an exported metric folder, nor a built-in metric {baseline_names()}")
    return BaselineMetric(str(name_or_path), **options)


def score_systems(metric, systems: dict[str, list[str]], ref, src=None, **kwargs) -> dict[str, ScoreResult]:
    """Score several systems' outputs in one pass: ``{system: result}``.

    ``ref``/``src`` are one list shared by all systems, a ``{system: list}`` dict, or None.
    One call sees every system, so a learned metric embeds each shared source and reference
    once; ``kwargs`` go to ``metric.score``.
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
    for name in names:
        scores = result.scores[start : start + len(systems[name])]
        start += len(scores)
        out[name] = ScoreResult(scores=scores, system_score=float(np.mean(scores)) if scores else float("nan"), signature=result.signature)
    return out


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


def systems_from_table(data, source: str) -> tuple[dict[str, list[str]], dict[str, list[str] | None], dict[str, list[str] | None]]:
    """Split a ratings table into per-system mt, ref and src lists (``system`` column, else one system).

    A table without ``ref`` (or ``src``) gives None for that field; whether the metric needs it
    is checked by the reader's ``required`` columns.
    """
    table = data.to_dict()
    systems = [str(s) for s in table.get("system", ["data"] * data.num_rows)]
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
