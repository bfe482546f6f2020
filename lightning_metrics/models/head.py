"""What a regression head adds beside its features: hybrid signals and a bias per rating source.

A hybrid model (``signals: [...]``) reads its baselines' scores, standardised with training
statistics, as extra head inputs, plus a linear skip from them to the output; ``start_from``
makes that skip carry one signal at step 0. A ``source_bias`` model learns one offset per rating
source (scoring uses the first source's). The parameters stay attributes of the model, so
checkpoints keep their names; this module builds and applies them.
"""

from __future__ import annotations

from typing import Optional

import torch

from lightning_metrics.errors import LightningMetricsError

MAX_SOURCES = 16  # rows of the per-source bias table


def zero_linear(n_in: int, n_out: int) -> torch.nn.Linear:
    """A linear layer that starts as the zero map."""
    layer = torch.nn.Linear(n_in, n_out)
    torch.nn.init.zeros_(layer.weight)
    torch.nn.init.zeros_(layer.bias)
    return layer


def source_bias_table(n_targets: int) -> torch.nn.Parameter:
    """One zero-initialised offset per rating source and target."""
    return torch.nn.Parameter(torch.zeros(MAX_SOURCES, max(1, n_targets)))


def start_as_signal(head: torch.nn.Module, skip: torch.nn.Linear, index: int) -> None:
    """The output starts as signal ``index`` (standardised) for the first target, 0 for the others:
    the head's last layer is zeroed and the skip passes that signal through."""
    last = [m for m in head.modules() if isinstance(m, torch.nn.Linear)][-1]
    torch.nn.init.zeros_(last.weight)
    torch.nn.init.zeros_(last.bias)
    with torch.no_grad():
        skip.weight[0, index] = 1.0


def standardised_signals(extras: dict, mean: torch.Tensor, std: torch.Tensor, names) -> torch.Tensor:
    """The batch's ``signals`` [B, k], standardised with the training statistics."""
    signals = extras.get("signals")
    if signals is None:
        raise LightningMetricsError(f"this model reads signals {list(names)}, but the batch has none")
    return (signals.float() - mean) / std


def add_source_bias(out: torch.Tensor, bias: Optional[torch.Tensor], extras: dict) -> torch.Tensor:
    """``out`` plus the bias of each row's ``source_id`` (source 0 when the batch has none)."""
    if bias is None:
        return out
    ids = extras.get("source_id")
    return out + (bias[ids] if ids is not None else bias[0]).to(out.dtype)
