"""The range of every numeric option of every subcommand: stated in ``--help``, checked after parsing.

One table, by option name (``seed``, ``batch_size``, ...), with per-command exceptions. A value
outside its range is one line naming the option (``--bootstrap: -1 is not at least 0``), before
any work starts. Ranges that depend on a model (a layer, ``--max-length`` against the encoder's
limit) are checked again where the model is loaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """``low`` up to ``high`` (None: no bound), both ends included unless ``open``."""

    low: float
    high: float | None = None
    open: bool = False

    def __str__(self) -> str:
        if self.open:
            return f"in ({self.low:g}, {self.high:g})"
        return f"at least {self.low:g}" if self.high is None else f"in [{self.low:g}, {self.high:g}]"

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.open:
            return self.low < value < self.high
        return value >= self.low and (self.high is None or value <= self.high)


COUNT, NON_NEGATIVE = Range(1), Range(0)
OPTION_RANGES = {
    "seed": NON_NEGATIVE,
    "bootstrap": NON_NEGATIVE,
    "num_proc": COUNT,
    "batch_size": COUNT,
    "max_length": COUNT,
    "layer": NON_NEGATIVE,
    "bertscore_layer": NON_NEGATIVE,
    "n_pairs": COUNT,
    "pairs_per_sentence": COUNT,
    "max_sentences": COUNT,
    "n": COUNT,
    "max_rows": COUNT,
    "weights": NON_NEGATIVE,
    "devices": COUNT,
    "mc_dropout": NON_NEGATIVE,
    "alpha": Range(0, 1, open=True),
    "num_candidates": COUNT,
    # quickstart's budgets
    "sentences": COUNT,
    "lr_encoder": NON_NEGATIVE,
    "lr_head": Range(0, 1, open=True),
    "pretrain_epochs": COUNT,
    "finetune_steps": COUNT,
    "probe_sentences": COUNT,
}
COMMAND_RANGES = {
    ("compare", "bootstrap"): COUNT,
    ("interpolate", "alpha"): Range(0, 1),
    ("interpolate", "alphas"): Range(0, 1, open=True),
    ("interpolate", "tolerance"): NON_NEGATIVE,
}


def range_of(command: str, dest: str) -> Range | None:
    return COMMAND_RANGES.get((command, dest), OPTION_RANGES.get(dest))


def annotate(parser, command: str) -> None:
    """Append each numeric option's range to its ``--help`` text."""
    for action in parser._actions:
        allowed = range_of(command, action.dest)
        if allowed is not None and action.option_strings:
            action.help = f"{action.help} ({allowed})" if action.help else f"({allowed})"


def range_problem(command: str, options) -> str | None:
    """The one-line error for the first option of ``options`` (a parsed namespace) outside its range."""
    values = options.as_dict() if hasattr(options, "as_dict") else vars(options)
    for dest, value in values.items():
        allowed = range_of(command, dest)
        for v in value if isinstance(value, list) else [value]:
            if allowed is not None and isinstance(v, (int, float)) and not isinstance(v, bool) and not allowed.holds(v):
                return f"--{dest.replace('_', '-')}: {v} is not {allowed}"
    return None
