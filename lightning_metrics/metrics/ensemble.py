"""Ensembles: one metric folder that scores with several metrics and averages them.

Each member's scores are standardised with the mean and standard deviation of that member's
scores on a table of training ratings (``--data`` at export), so a member on a 0-100 scale
(chrF) and one on a z-score scale weigh alike; the ensemble's score is the weighted mean of
the standardised scores (a member where lower is better, MetricX, enters turned round). Members
are exported metric folders (copied into ``members/``) or built-in metrics with their options.
Built-in members of one family (BERTScore P/R/F) are computed once, and learned members whose
encoders hold the same weights embed each sentence once.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.base import Metric
from lightning_metrics.metrics.builtin import BuiltinMetric, builtin, builtin_family_scores
from lightning_metrics.signature import Signature
from lightning_metrics.storage.artifact import Export

FAMILY = "Ensemble"
MEMBERS = "members"


class Ensemble(Metric):
    """Weighted mean of standardised member scores (see the module docstring)."""

    def __init__(
        self,
        name: str,
        members: Sequence[tuple[str, Metric, dict]],
        stats: Sequence[dict],
        weights: Sequence[float],
        short_hash: str = "none",
    ):
        if not members:
            raise LightningMetricsError("an ensemble needs at least one member")
        self.name, self.members, self.stats, self.short_hash = name, list(members), list(stats), short_hash
        self.weights = np.asarray(weights, dtype=np.float64) / np.sum(weights)
        self.inputs = tuple(f for f in ("src", "mt", "ref") if any(f in m.inputs for _, m, _ in self.members))
        _share_embeddings([m for _, m, _ in self.members])

    @classmethod
    def from_export(cls, export: Export, load_member: Callable[[str], Metric]) -> "Ensemble":
        """The ensemble of a verified export; ``load_member(folder)`` loads each exported member."""
        members = []
        for spec in export.meta.get("members", []):
            if spec.get("kind") == "export":
                members.append((spec["label"], load_member(str(export.file(spec["path"]))), spec))
            else:
                members.append((spec["label"], builtin(spec["name"], **spec.get("options", {})), spec))
        return cls(export.path.name, members, export.meta["stats"], export.meta["weights"], export.short_hash)

    @property
    def signature(self) -> Signature:
        labels = "+".join(label for label, _, _ in self.members)
        return Signature.of(self.name, hash=self.short_hash, family=FAMILY, members=labels, system="mean")

    def member_scores(self, columns: dict[str, list[str]], options: ScoreOptions) -> dict[str, np.ndarray]:
        """Each member's raw segment scores, built-in families with equal settings computed once."""
        built = {label: m for label, m, _ in self.members if isinstance(m, BuiltinMetric)}
        out = {
            k: np.asarray(v) for k, v in builtin_family_scores(built, columns["mt"], columns["ref"], options).items()
        }
        for label, metric, _ in self.members:
            if label not in out:
                given = {f: columns.get(f) for f in ("mt", "ref", "src")}
                out[label] = np.asarray(metric.score(**given, options=options).scores)
        return out

    def standardised(self, raw: dict[str, np.ndarray]) -> np.ndarray:
        """``[n_members, n]`` member scores, each standardised with its stored statistics and turned round
        where lower is better (MetricX), so every member and the ensemble rank higher as better."""
        return np.stack([
            (raw[label] - s["mean"]) / s["std"] * (1.0 if m.higher_is_better else -1.0)
            for (label, m, _), s in zip(self.members, self.stats)
        ])  # fmt: skip

    def segment_scores(self, columns, options: ScoreOptions) -> list[float]:
        z = self.standardised(self.member_scores(columns, options))
        return (self.weights @ z).tolist()


def _share_embeddings(metrics: Sequence[Metric]) -> None:
    """Learned sentence-embedding members whose encoders hold the same weights share one embedding cache."""
    from lightning_metrics.metrics.learned import LearnedMetric

    caches: dict[str, dict] = {}
    for metric in metrics:
        if isinstance(metric, LearnedMetric) and metric.model.input_format == "sentences":
            metric.shared_embeddings = caches.setdefault(metric.encoder_key(), {})
