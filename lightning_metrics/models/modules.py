"""Reusable network pieces: the layer mix, pooling and the feed-forward head."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

LAYER_TRANSFORMS = ("softmax", "sparsemax")
POOLINGS = ("avg", "max", "cls")


class LayerMix(nn.Module):
    """Scalar mix of all hidden layers (embeddings included), times a learned scale.

    ``transform`` turns the per-layer weights into a distribution: ``softmax`` (every layer
    contributes) or ``sparsemax`` (from the ``entmax`` package; unhelpful layers get exactly 0,
    as in COMET). ``forward(hidden_states)`` takes the tuple a Hugging Face encoder returns with
    ``output_hidden_states=True``. ``dropout`` drops whole layers from the mix in training.
    """

    def __init__(self, n_layers: int, dropout: float = 0.0, transform: str = "softmax"):
        super().__init__()
        if transform not in LAYER_TRANSFORMS:
            raise ValueError(f"layer_transform must be one of {LAYER_TRANSFORMS}, got {transform!r}")
        self.weights = nn.Parameter(torch.zeros(n_layers))
        self.gamma = nn.Parameter(torch.ones(1))
        self.dropout, self.transform = dropout, transform

    def distribution(self, weights: torch.Tensor) -> torch.Tensor:
        if self.transform == "sparsemax":
            from entmax import sparsemax

            return sparsemax(weights, dim=0)
        return torch.softmax(weights, dim=0)

    def forward(self, hidden_states: Sequence[torch.Tensor]) -> torch.Tensor:
        weights = self.weights
        if self.training and self.dropout > 0:
            drop = torch.rand_like(weights) < self.dropout
            if not drop.all():
                weights = weights.masked_fill(drop, -1e4)
        mix = self.distribution(weights)
        return self.gamma * torch.einsum(
            "l,lbth->bth", mix.to(hidden_states[0].dtype), torch.stack(tuple(hidden_states), dim=0)
        )


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, method: str = "avg") -> torch.Tensor:
    """Sentence vectors from token vectors: ``avg`` (masked mean), ``max`` (masked max) or ``cls``."""
    if method == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    if method == "avg":
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)
    if method == "max":
        return hidden.masked_fill(mask == 0, torch.finfo(hidden.dtype).min).amax(dim=1)
    raise ValueError(f"pooling must be one of {POOLINGS}, got {method!r}")


class FeedForward(nn.Sequential):
    """``in -> [Linear -> Tanh -> Dropout] per hidden size -> Linear -> out``."""

    def __init__(self, in_dim: int, hidden_sizes: Sequence[int] = (256,), out_dim: int = 1, dropout: float = 0.1):
        layers: list[nn.Module] = []
        for size in hidden_sizes:
            layers += [nn.Linear(in_dim, size), nn.Tanh(), nn.Dropout(dropout)]
            in_dim = size
        layers.append(nn.Linear(in_dim, out_dim))
        super().__init__(*layers)
