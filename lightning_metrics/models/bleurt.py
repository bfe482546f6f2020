"""`BleurtRegressor`: a cross-encoder over ``[CLS] ref [SEP] mt [SEP]`` with one output per target.

Pre-training regresses every synthetic signal at once (``targets`` = score, bleu, chrf, ...;
the loss is the weighted sum of per-target MSE on standardised targets). Fine-tuning uses
``targets: [score]`` on human ratings and can start from a pre-training checkpoint
(``init_from``). The metric's output is always the first target, on the training data's scale.
"""

from __future__ import annotations

import torch

from lightning_metrics.models.base import MetricModel


class BleurtRegressor(MetricModel):
    input_format = "cross"

    def __init__(self, **kwargs):
        """Arguments as :class:`MetricModel` (encoder, targets, learning rates, freezing, head sizes, ...)."""
        super().__init__(**kwargs)
        self.head = self.make_head(self.hidden_size)
        self.init_head()

    def forward(self, batch: dict) -> torch.Tensor:
        """Standardised predictions [B, n_targets] for a tokenised (ref, mt) batch."""
        return self.head_output(self.embed(batch["inputs"]), batch)
