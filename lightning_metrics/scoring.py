"""Scoring with a metric by name: ``load_metric(name).score(mt=..., ref=...)``.

Every metric returns the same :class:`ScoreResult`: segment scores in input order, the system
score (the mean of the segments), and a signature that says how the numbers were made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    ) -> ScoreResult:
        """Score candidates ``mt`` against references ``ref`` (``src`` is accepted and unused)."""
        if ref is None:
            raise LightningMetricsError(f"{self.name} needs references (ref=...)")
        if len(mt) != len(ref) or (src is not None and len(src) != len(mt)):
            counts = f"{len(mt)} mt, {len(ref)} ref" + ("" if src is None else f", {len(src)} src")
            raise LightningMetricsError(f"inputs differ in length: {counts}")
        options = dict(self.options)
        if self.name.startswith("bertscore"):
            options["bertscore"] = {**options.get("bertscore", {}), "batch_size": batch_size, "device": device}
        values = baseline_scores([self.name], list(mt), list(ref), **options)[self.name]
        return ScoreResult(scores=list(values), system_score=float(np.mean(values)) if values else float("nan"), signature=self.signature)


def load_metric(name_or_path: str, **options) -> BaselineMetric:
    """A metric by name: ``bleu``, ``chrf``, ``rouge1``/``rouge2``/``rougeL``, ``bertscore`` (F1),
    ``bertscore_p``, ``bertscore_r``. ``options`` go to the metric (for BERTScore:
    ``bertscore={"model": ..., "layer": ...}``)."""
    return BaselineMetric(str(name_or_path), **options)


def score_systems(metric, systems: dict[str, list[str]], ref: list[str] | None, src: list[str] | None, **kwargs) -> dict[str, ScoreResult]:
    """Score several systems' outputs against the same references; ``{system: result}``."""
    return {name: metric.score(mt=lines, ref=ref, src=src, **kwargs) for name, lines in systems.items()}


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


def systems_from_table(data, source: str) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str] | None]]:
    """Split a ratings table into per-system mt, ref and src lists (``system`` column, else one system)."""
    table = data.to_dict()
    systems = table.get("system", ["data"] * data.num_rows)
    mt, ref, src = table["mt"], table.get("ref"), table.get("src")
    if ref is None:
        raise InputError(source, "missing required column 'ref'")
    by_mt, by_ref, by_src = {}, {}, {}
    for i, name in enumerate(systems):
        by_mt.setdefault(str(name), []).append(mt[i])
        by_ref.setdefault(str(name), []).append(ref[i])
        if src is not None:
            by_src.setdefault(str(name), []).append(src[i])
    return by_mt, by_ref, {k: by_src.get(k) for k in by_mt}
