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

from typing import Optional

import torch

from lightning_metrics.encoders.features import CACHEABLE_POOLINGS, FeatureTable
from lightning_metrics.models.base import MetricModel


class SentenceEmbeddingModel(MetricModel):
    """A metric over separately encoded fields; subclasses map field vectors to predictions.

    A fit that never trains the encoder reads cached features (``readout.cached_features``): the
    fit's :class:`~lightning_metrics.models.data_link.DataLink` computes each distinct sentence's pooled
    layers once and sets :attr:`feature_table`; the batches' ``texts`` find them there.
    """

    input_format = "sentences"
    feature_table: Optional[FeatureTable] = None  # set for one fit, never saved

    def reads_cached_features(self) -> bool:
        """Whether a fit can train from cached features: asked for, the encoder never trains, and the
        pooling commutes with the layer mix."""
        readout = self.readout
        return readout.cached_features and not self._tunable_encoder and readout.pooling in CACHEABLE_POOLINGS

    def field_embeddings(self, batch: dict) -> dict[str, torch.Tensor]:
        """``{field: [B, H]}``: the batch's unique sentences embedded once, then gathered per row."""
        inputs = batch["inputs"]
        if self.feature_table is not None and "texts" in batch:
            unique = self.read_out_cached(*self.feature_table.lookup(batch["texts"]))
        elif isinstance(inputs, list):
            unique = torch.cat([self.embed(group) for group in inputs])
        else:
            unique = self.embed(inputs)
        return {field: unique[positions] for field, positions in batch["positions"].items()}

    def read_out_cached(self, pooled: torch.Tensor, moments: torch.Tensor) -> torch.Tensor:
        """What :meth:`read_out` gives, from cached pooled layers ``[B, L, H]`` and their moments."""
        pooled, moments = pooled.to(self.device), moments.to(self.device)
        if self.layer_mix is not None:
            return self.layer_mix.mix_pooled(pooled, moments).float()
        layer = self.readout.layer
        return pooled[:, -1 if layer is None else layer].float()

    def forward(self, batch: dict) -> torch.Tensor:
        return self.from_embeddings(self.vectors(batch))

    def vectors(self, batch: dict) -> dict[str, torch.Tensor]:
        """The field embeddings of a batch, with its ``signals`` and ``source_id`` when it has them."""
        return {**self.field_embeddings(batch), **{k: batch[k] for k in ("signals", "source_id") if k in batch}}

    def from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Standardised predictions [B, n_targets] from ``{field: [B, H]}`` sentence vectors
        (and ``signals``/``source_id``, see :meth:`MetricModel.head_output`)."""
        raise NotImplementedError

    def scores_from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Metric scores [B] from sentence vectors (the scorer embeds unique sentences itself)."""
        return self.scores_from(self.from_embeddings(vectors))

    def predict_scores(self, batch: dict) -> torch.Tensor:
        return self.scores_from_embeddings(self.vectors(batch))


class CometEstimator(SentenceEmbeddingModel):
    """Source- and reference-aware estimator (COMET's ``RegressionMetric``).

    ``source_features=False`` drops ``mt*src`` and ``|mt-src|`` (width 4H) and the source is not
    read at all: for an encoder that cannot read the source language (the default encoder is
    English-only), those features may be noise.
    """

    inputs = train_fields = ("src", "mt", "ref")  # with source_features=False the instance reads ("mt", "ref")

    def __init__(self, source_features: bool = True, **kwargs):
        """``source_features``: see the class docstring; other arguments as :class:`MetricModel`."""
        self.inputs = self.train_fields = ("src", "mt", "ref") if source_features else ("mt", "ref")
        super().__init__(**kwargs)
        self.head = self.make_head((6 if source_features else 4) * self.hidden_size)
        self.init_head()

    @staticmethod
    def features(src: torch.Tensor | None, mt: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        """``[mt; ref; mt*ref; |mt-ref|; mt*src; |mt-src|]`` (6H), or the first four (4H) without ``src``."""
        parts = [mt, ref, mt * ref, (mt - ref).abs()]
        if src is not None:
            parts += [mt * src, (mt - src).abs()]
        return torch.cat(parts, dim=1)

    def from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head_output(self.features(vectors.get("src"), vectors["mt"], vectors["ref"]), vectors)


class CometReferenceless(SentenceEmbeddingModel):
    """Reference-free estimator (quality estimation): reads src and mt only."""

    inputs = ("src", "mt")
    train_fields = ("src", "mt")

    def __init__(self, **kwargs):
        """Arguments as :class:`MetricModel`; ``hidden_sizes`` are the head's hidden layers."""
        super().__init__(**kwargs)
        self.head = self.make_head(4 * self.hidden_size)
        self.init_head()

    @staticmethod
    def features(src: torch.Tensor, mt: torch.Tensor) -> torch.Tensor:
        """``[mt; src; mt*src; |mt-src|]``, width 4H."""
        return torch.cat([mt, src, mt * src, (mt - src).abs()], dim=1)

    def from_embeddings(self, vectors: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head_output(self.features(vectors["src"], vectors["mt"]), vectors)
