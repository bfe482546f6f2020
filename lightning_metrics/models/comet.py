"""COMET-style regressors: src, mt and ref encoded separately by one shared encoder.

Sentence vectors are layer-mixed and average-pooled. Each unique sentence of a batch is encoded
once (:class:`~lightning_metrics.data.batching.SentencesCollate`): sources and references
repeat across systems, and COMET re-encodes them for every row.

- :class:`CometEstimator`: ``[mt; ref; mt*ref; |mt-ref|; mt*src; |mt-src|]`` (6H) -> head.
- :class:`CometReferenceless`: ``[mt; src; mt*src; |mt-src|]`` (4H) -> head, no reference.

Both train like the BLEURT-style model: standardised multi-target MSE, so they pre-train on
``generate`` output from a parallel corpus (targets score + signals) and fine-tune on human
ratings (``init_from``).
"""

from __future__ import annotations

import torch

from lightning_metrics.models.base import MetricModel
from lightning_metrics.models.modules import FeedForward


class SentenceEmbeddingModel(MetricModel):
    """A metric over separately encoded fields; subclasses map field vectors to predictions."""

    input_format = "sentences"

    def field_embeddings(self, batch: dict) -> dict[str, torch.Tensor]:
        """``{field: [B, H]}``: the batch's unique sentences embedded once, then gathered per row."""
        inputs = batch["inputs"]
        unique = torch.cat([self.embed(group) for group in inputs]) if isinstance(inputs, list) else self.embed(inputs)
        return {field: unique[positions] for field, positions in batch["positions"].items()}

    def forward(self, batch: dict) -> torch.Tensor:
        return self.from_embeddings(self.field_embeddings(batch))

    def from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Standardised predictions [B, n_targets] from ``{field: [B, H]}`` sentence vectors."""
        raise NotImplementedError

    def scores_from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Metric scores [B] from sentence vectors (the scorer embeds unique sentences itself)."""
        return self.scores_from(self.from_embeddings(vectors))

    def predict_scores(self, batch: dict) -> torch.Tensor:
        return self.scores_from_embeddings(self.field_embeddings(batch))


class CometEstimator(SentenceEmbeddingModel):
    """Source- and reference-aware estimator (COMET's ``RegressionMetric``)."""

    inputs = ("src", "mt", "ref")
    train_fields = ("src", "mt", "ref")

    def __init__(self, **kwargs):
        """Arguments as :class:`MetricModel`; ``hidden_sizes`` are the head's hidden layers."""
        super().__init__(**kwargs)
        self.head = FeedForward(6 * self.hidden_size, self.hparams.hidden_sizes, out_dim=len(self.targets), dropout=self.hparams.dropout)
        self.initialise_from(self.hparams.init_from)

    @staticmethod
    def features(src: torch.Tensor, mt: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        """``[mt; ref; mt*ref; |mt-ref|; mt*src; |mt-src|]``, width 6H."""
        return torch.cat([mt, ref, mt * ref, (mt - ref).abs(), mt * src, (mt - src).abs()], dim=1)

    def from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.features(vectors["src"], vectors["mt"], vectors["ref"]))


class CometReferenceless(SentenceEmbeddingModel):
    """Reference-free estimator (quality estimation): reads src and mt only."""

    inputs = ("src", "mt")
    train_fields = ("src", "mt")

    def __init__(self, **kwargs):
        """Arguments as :class:`MetricModel`; ``hidden_sizes`` are the head's hidden layers."""
        super().__init__(**kwargs)
        self.head = FeedForward(4 * self.hidden_size, self.hparams.hidden_sizes, out_dim=len(self.targets), dropout=self.hparams.dropout)
        self.initialise_from(self.hparams.init_from)

    @staticmethod
    def features(src: torch.Tensor, mt: torch.Tensor) -> torch.Tensor:
        """``[mt; src; mt*src; |mt-src|]``, width 4H."""
        return torch.cat([mt, src, mt * src, (mt - src).abs()], dim=1)

    def from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.features(vectors["src"], vectors["mt"]))
