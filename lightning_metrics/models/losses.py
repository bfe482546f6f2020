"""Training objectives on standardised targets: robust regression and a pairwise ranking term.

- :func:`regression_loss`: per-target MSE or Huber, optionally on targets clipped to ``±clip``
  standard deviations (DA z-scores have tails past 5), with per-row weights.
- :func:`pairwise_loss`: for rows of one group (the outputs for one source) whose human scores
  differ, ``max(0, margin - (pred_better - pred_worse))`` averaged over the pairs. It is zero
  exactly when every such pair is ordered by at least ``margin``; segment Kendall counts
  orderings, which MSE on noisy scores does not.
- :func:`objective_weights`: each target's weight in the loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lightning_metrics.errors import LightningMetricsError

LOSSES = ("mse", "huber")


def regression_loss(
    pred: torch.Tensor,
    target: torch.Tensor,
    kind: str = "mse",
    delta: float = 1.0,
    clip: float | None = None,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[n_targets]`` losses of ``pred`` against ``target`` (both ``[B, n_targets]``)."""
    if clip is not None:
        target = target.clamp(-clip, clip)
    if kind == "mse":
        per = (pred - target) ** 2
    elif kind == "huber":
        per = F.huber_loss(pred, target, reduction="none", delta=delta)
    else:
        raise ValueError(f"loss must be one of {LOSSES}, got {kind!r}")
    if weight is None:
        return per.mean(dim=0)
    w = weight.to(per.dtype).unsqueeze(1)
    return (per * w).sum(dim=0) / w.sum().clamp_min(1e-12)


def pairwise_loss(pred: torch.Tensor, human: torch.Tensor, groups: torch.Tensor, margin: float = 0.1) -> torch.Tensor:
    """Hinge loss over the ordered pairs of rows in the same group (see the module docstring); 0 without pairs."""
    same = groups.unsqueeze(0) == groups.unsqueeze(1)
    better = human.unsqueeze(1) > human.unsqueeze(0)  # [i, j]: row i is better than row j
    pairs = same & better
    if not bool(pairs.any()):
        return pred.new_zeros(())
    gaps = pred.unsqueeze(1) - pred.unsqueeze(0)
    return F.relu(margin - gaps[pairs]).mean()


def squared_distance(params: dict[str, torch.Tensor], start: dict[str, torch.Tensor]) -> torch.Tensor:
    """``sum ||p - p0||^2`` over the parameters named in ``start`` (moved to their device once)."""
    total = None
    for name, value in start.items():
        param = params[name]
        if value.device != param.device:
            start[name] = value = value.to(param.device)
        part = (param.float() - value).pow(2).sum()
        total = part if total is None else total + part
    return total if total is not None else torch.zeros(())


def objective_weights(loss: str, loss_weights: dict | None, targets: list[str]) -> list[float]:
    """Each target's weight in the loss (1 unless ``loss_weights`` names it), once ``loss`` is known."""
    if loss not in LOSSES:
        raise LightningMetricsError(f"model.loss must be one of {LOSSES}, got {loss!r}")
    unknown = set(loss_weights or {}) - set(targets)
    if unknown:
        raise LightningMetricsError(f"loss_weights name(s) {sorted(unknown)} that are not targets {targets}")
    return [float((loss_weights or {}).get(t, 1.0)) for t in targets]
