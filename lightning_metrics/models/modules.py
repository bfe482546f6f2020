"""Reusable network pieces: the layer mix, pooling and the feed-forward head."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

LAYER_TRANSFORMS = ("softmax", "sparsemax")
POOLINGS = ("avg", "max", "cls")
ACTIVATIONS = ("Tanh", "Sigmoid", "ReLU", "GELU", "SiLU", "Softplus", "ELU", "LeakyReLU")  # torch.nn classes


def activation(name: str) -> nn.Module:
    """A head activation by its ``torch.nn`` class name, any case (``tanh``, ``Tanh``; COMET's ``activations``)."""
    by_name = {a.lower(): a for a in ACTIVATIONS}
    if str(name).lower() not in by_name:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {name!r}")
    return getattr(nn, by_name[str(name).lower()])()


class LayerMix(nn.Module):
    """Scalar mix of all hidden layers (embeddings included), times a learned scale.

    ``transform`` turns the per-layer weights into a distribution: ``softmax`` (every layer
    contributes) or ``sparsemax`` (from the ``entmax`` package; unhelpful layers get exactly 0,
    as in COMET). ``forward(hidden_states, attention_mask)`` takes the tuple a Hugging Face encoder
    returns with ``output_hidden_states=True``. ``dropout`` drops whole layers from the mix in
    training. ``layer_norm`` first standardises each layer over its unmasked tokens and features
    together (COMET's ``layer_norm``; no learned scale), so every layer enters the mix on one scale.
    """

    def __init__(self, n_layers: int, dropout: float = 0.0, transform: str = "softmax", layer_norm: bool = False):
        super().__init__()
        if transform not in LAYER_TRANSFORMS:
            raise ValueError(f"layer_transform must be one of {LAYER_TRANSFORMS}, got {transform!r}")
        self.weights = nn.Parameter(torch.zeros(n_layers))
        self.gamma = nn.Parameter(torch.ones(1))
        self.dropout, self.transform, self.layer_norm = dropout, transform, layer_norm

    def distribution(self, weights: torch.Tensor) -> torch.Tensor:
        if self.transform == "sparsemax":
            from entmax import sparsemax

            return sparsemax(weights, dim=0)
        return torch.softmax(weights, dim=0)

    def mixing_weights(self) -> torch.Tensor:
        """The distribution over layers (whole layers dropped at random in training)."""
        weights = self.weights
        if self.training and self.dropout > 0:
            drop = torch.rand_like(weights) < self.dropout
            if not drop.all():
                weights = weights.masked_fill(drop, -1e4)
        return self.distribution(weights)

    def forward(
        self, hidden_states: Sequence[torch.Tensor], attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        mix = self.mixing_weights()
        layers = torch.stack(tuple(hidden_states), dim=0)
        if self.layer_norm:
            layers = masked_standardise(layers, attention_mask)
        return self.gamma * torch.einsum("l,lbth->bth", mix.to(layers.dtype), layers)

    def mix_pooled(self, pooled: torch.Tensor, moments: torch.Tensor) -> torch.Tensor:
        """The mix of already pooled layers, ``[B, L, H]`` with each layer's token mean and variance
        ``[B, L, 2]`` (for ``layer_norm``): what pooling :meth:`forward`'s output gives, for a pooling
        that is linear in the tokens (average, CLS)."""
        mix = self.mixing_weights()
        if self.layer_norm:
            pooled = (pooled - moments[..., :1]) / torch.sqrt(moments[..., 1:] + 1e-12)
        return self.gamma * torch.einsum("l,blh->bh", mix.to(pooled.dtype), pooled)


def masked_standardise(layers: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """``[L, B, T, H]`` layers, each row of each layer centred and scaled by the mean and variance of
    its unmasked tokens' values (all features together), with epsilon 1e-12 as in COMET."""
    if attention_mask is None:
        attention_mask = torch.ones(layers.shape[1:3], device=layers.device)
    mask = attention_mask.to(layers.dtype)[None, :, :, None]  # [1, B, T, 1]
    count = mask.sum(dim=(2, 3), keepdim=True) * layers.shape[-1]
    mean = (layers * mask).sum(dim=(2, 3), keepdim=True) / count
    variance = (((layers * mask - mean) * mask) ** 2).sum(dim=(2, 3), keepdim=True) / count
    return (layers - mean) / torch.sqrt(variance + 1e-12)


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
    """``in -> [Linear -> activation -> Dropout] per hidden size -> Linear [-> final activation] -> out``
    (COMET's estimator, module for module, so its weights keep their indices)."""

    def __init__(
        self,
        in_dim: int,
        hidden_sizes: Sequence[int] = (256,),
        out_dim: int = 1,
        dropout: float = 0.1,
        activation_name: str = "Tanh",
        final_activation: str | None = None,
    ):
        layers: list[nn.Module] = []
        for size in hidden_sizes:
            layers += [nn.Linear(in_dim, size), activation(activation_name), nn.Dropout(dropout)]
            in_dim = size
        layers.append(nn.Linear(in_dim, out_dim))
        if final_activation is not None:
            layers.append(activation(final_activation))
        super().__init__(*layers)
