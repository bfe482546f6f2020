"""`CometRanker`: COMET's ranking model, trained on (src, ref, better, worse) tuples.

Training pulls the better output (``pos``) towards the anchors and pushes the worse one
(``neg``) away: a triplet margin loss with the source as anchor plus one with the reference as
anchor. The score of an output is ``1 / (1 + harmonic mean(d(mt, src), d(mt, ref)))`` with
Euclidean distances, so it lies in (0, 1] and higher is better. Validation reports WMT's DARR
Kendall on held-out pairs.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from lightning_metrics.correlation import darr_kendall
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models.comet import SentenceEmbeddingModel
from lightning_metrics.models.options import Head, as_group


def ranking_score(mt: torch.Tensor, src: torch.Tensor, ref: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """``1 / (1 + 2 ds dr / (ds + dr))`` with ``ds = |mt - src + eps|``, ``dr = |mt - ref + eps|`` (rows of
    [B, H]; COMET's distance, ``torch.nn.functional.pairwise_distance``, adds ``eps`` = 1e-6)."""
    ds = torch.linalg.vector_norm(mt - src + eps, dim=1)
    dr = torch.linalg.vector_norm(mt - ref + eps, dim=1)
    total = ds + dr
    harmonic = torch.where(
        total > 0, 2 * ds * dr / total.clamp_min(torch.finfo(total.dtype).tiny), torch.zeros_like(total)
    )
    return 1.0 / (1.0 + harmonic)


class CometRanker(SentenceEmbeddingModel):
    """Triplet-margin ranking metric; no head, no targets: the score is a distance."""

    inputs = ("src", "mt", "ref")
    train_fields = ("src", "ref", "pos", "neg")

    def __init__(self, margin: float = 1.0, distance_eps: float = 0.0, **kwargs):
        """``margin`` of the triplet losses; ``distance_eps`` added to each difference before its norm in the
        score (1e-6 in a model imported from COMET, whose distance adds it); other arguments as
        :class:`MetricModel` (``targets`` is ignored)."""
        kwargs["targets"] = ()
        if kwargs.get("signals") or as_group(Head, kwargs.get("head"), "model.head").source_bias:
            raise LightningMetricsError("CometRanker has no head: signals and head.source_bias do not apply")
        super().__init__(**kwargs)
        self.initialise_from(self.hparams.init_from)

    def scores_from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        eps = self.hparams.get("distance_eps", 0.0)
        return ranking_score(vectors["mt"].float(), vectors["src"].float(), vectors["ref"].float(), eps)

    def forward(self, batch: dict) -> torch.Tensor:
        return self.predict_scores(batch).unsqueeze(1)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        e = {k: v.float() for k, v in self.field_embeddings(batch).items()}
        margin = self.hparams.margin
        loss = F.triplet_margin_loss(e["src"], e["pos"], e["neg"], margin=margin) + F.triplet_margin_loss(
            e["ref"], e["pos"], e["neg"], margin=margin
        )
        self.log("train_loss", loss, prog_bar=True, batch_size=len(e["pos"]))
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        e = {k: v.float() for k, v in self.field_embeddings(batch).items()}
        eps = self.hparams.get("distance_eps", 0.0)
        better = ranking_score(e["pos"], e["src"], e["ref"], eps)
        worse = ranking_score(e["neg"], e["src"], e["ref"], eps)
        self._outputs.append(
            torch.stack([batch["index"].float(), better, worse, batch["lp"].float(), batch["system"].float()], dim=1)
        )

    test_step = validation_step

    def _log_correlations(self, prefix: str) -> None:
        rows = self.gathered_outputs()
        if not len(rows):
            return
        lp_names = self.group_names
        values = []
        for lp in np.unique(rows[:, 3]):
            sel = rows[rows[:, 3] == lp]
            values.append(darr_kendall(sel[:, 1], sel[:, 2]))
            if len(lp_names) > 1 and 0 <= lp < len(lp_names):
                self.log(f"{prefix}_kendall/{lp_names[int(lp)]}", values[-1], sync_dist=False, rank_zero_only=False)
        finite = [v for v in values if math.isfinite(v)]
        if finite:
            self.log(f"{prefix}_kendall", float(np.mean(finite)), prog_bar=True, sync_dist=False, rank_zero_only=False)
