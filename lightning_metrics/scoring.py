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


class LearnedMetric:
    """An exported metric folder (see :mod:`lightning_metrics.export`), loaded for scoring.

    Reads ``metric.json``, ``model.safetensors``, ``config.json`` and the tokenizer files; never
    a pickle. Scoring sorts pairs by length, runs under ``inference_mode`` (bf16 autocast on
    CUDA) and returns scores in input order.
    """

    needs_ref = True

    def __init__(self, path: str | Path):
        import json

        from safetensors.torch import load_file

        from lightning_metrics.export import FORMAT_VERSION, _families, folder_hash

        self.path = Path(path)
        meta_path = self.path / "metric.json"
        if not meta_path.is_file():
            raise InputError(str(self.path), "not an exported metric folder (no metric.json)")
        try:
            self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InputError(str(meta_path), f"unreadable metric.json ({e.msg})") from None
        version = self.meta.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise InputError(str(self.path), f"format version {version} is newer than this code reads ({FORMAT_VERSION}); upgrade lightning-metrics")
        family = _families().get(self.meta.get("family"))
        if family is None:
            raise InputError(str(self.path), f"unknown metric family {self.meta.get('family')!r}")
        self.needs_src = "src" in self.meta.get("inputs", [])
        self.model = family(**{**self.meta["hyper_parameters"], "encoder": str(self.path), "targets": self.meta["targets"]})
        self.model.load_state_dict(load_file(self.path / "model.safetensors"))
        self.model.eval()
        self.tokenizer = self.model_tokenizer()
        self.signature = f"{self.path.name}|hash:{folder_hash(self.path)}|family:{self.meta['family']}|lightning-metrics:{__version__}"

    def model_tokenizer(self):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.path))

    def score(self, mt: Sequence[str], ref: Sequence[str] | None = None, src: Sequence[str] | None = None,
              batch_size: int = 64, device: str = "cpu") -> ScoreResult:
        """Segment scores for (mt, ref) pairs in input order, and their mean."""
        import torch

        from lightning_metrics.data.batching import CrossEncoderCollate

        if ref is None:
            raise LightningMetricsError(f"{self.path.name} needs references (ref=...)")
        if self.needs_src and src is None:
            raise LightningMetricsError(f"{self.path.name} needs sources (src=... or -s FILE)")
        if len(mt) != len(ref) or (src is not None and len(src) != len(mt)):
            raise LightningMetricsError(f"inputs differ in length: {len(mt)} mt, {len(ref)} ref" + ("" if src is None else f", {len(src)} src"))
        target = torch.device(device)
        self.model.to(target)
        collate = CrossEncoderCollate(self.tokenizer, min(256, int(self.tokenizer.model_max_length)), [], {}, {})
        order = sorted(range(len(mt)), key=lambda i: len(mt[i]) + len(ref[i]))
        out = np.zeros(len(mt))
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if target.type == "cuda" else torch.autocast("cpu", enabled=False)
        with torch.inference_mode(), autocast:
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                batch = collate([{"mt": mt[i], "ref": ref[i], "index": i} for i in idx])
                batch["inputs"] = {k: v.to(target) for k, v in batch["inputs"].items()}
                out[idx] = self.model.scores_from(self.model(batch)).float().cpu().numpy()
        return ScoreResult(scores=out.tolist(), system_score=float(out.mean()) if len(out) else float("nan"), signature=self.signature)


def load_metric(name_or_path: str, **options) -> BaselineMetric | LearnedMetric:
    """A metric by folder or name.

    A folder written by ``lightning-metrics export`` loads as a :class:`LearnedMetric`. Names:
    ``bleu``, ``chrf``, ``rouge1``/``rouge2``/``rougeL``, ``bertscore`` (F1), ``bertscore_p``,
    ``bertscore_r``; ``options`` go to those (for BERTScore: ``bertscore={"model": ...}``).
    """
    if Path(str(name_or_path)).is_dir():
        return LearnedMetric(name_or_path)
    if str(name_or_path) not in baseline_names():
        raise LightningMetricsError(f"unknown metric {str(name_or_path)!r}: not an exported metric folder, nor a built-in metric {baseline_names()}")
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
