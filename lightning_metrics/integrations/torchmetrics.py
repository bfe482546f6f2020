"""``MetricScore(spec)``: any metric spec as a ``torchmetrics.Metric``, for validation inside a Lightning
training loop, synced across processes.

- ``update(mt, ref=None, src=None)`` scores a batch of strings (lists);
- ``compute()`` gives the system score of every row seen by every process: corpus BLEU and chrF from
  their summed sacrebleu statistics (as one process scoring all rows), the mean of the segment scores
  for every other metric; ``segment_scores()`` gives those, in process order.

The metric a spec names is built once per process, on first use, and scores on the device the
``MetricScore`` was moved to (with its LightningModule). It is not a submodule: its weights are not in
the module's ``state_dict``, no optimiser sees them, and it scores without gradients.

    class Generator(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.chrf = MetricScore("chrf")
            self.learned = MetricScore("checkpoints/quickstart")

        def validation_step(self, batch, i):
            hyps = self.generate(batch["src"])
            self.chrf.update(hyps, batch["ref"])
            self.learned.update(hyps, batch["ref"])
            self.log_dict({"val_chrf": self.chrf, "val_learned": self.learned})
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from lightning_metrics.baselines import lexical
from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.metrics import load_metric, parse_spec
from lightning_metrics.metrics.builtin import BuiltinMetric

CORPUS_FAMILIES = ("bleu", "chrf")  # system scores from summed statistics, not a mean of sentence scores


class MetricScore(Metric):
    """A metric spec (``chrf``, ``bleu:tokenize=ja-mecab``, an export folder, an ensemble, a hub id) as a
    ``torchmetrics.Metric`` (module docstring); ``options`` go to :func:`~lightning_metrics.metrics.load_metric`."""

    full_state_update = False

    def __init__(self, spec: str, batch_size: int | None = None, **options):
        super().__init__()
        self.spec, self.options, self.batch_size = str(spec), options, batch_size
        parse_spec(self.spec)  # a bad spec is one line now, not at the first update
        self._metric = None
        metric = self.metric
        object.__setattr__(self, "higher_is_better", metric.higher_is_better)  # torchmetrics' class constant, per spec
        self.corpus = isinstance(metric, BuiltinMetric) and metric.family in CORPUS_FAMILIES
        self.add_state("scores", default=[], dist_reduce_fx="cat")
        if self.corpus:
            width = lexical.corpus_statistics(metric.family, ["a"], [["a"]], **metric.settings).shape[1]
            self.add_state("statistics", default=torch.zeros(width, dtype=torch.float64), dist_reduce_fx="sum")

    @property
    def metric(self):
        """The metric the spec names, built once in this process."""
        if self._metric is None:
            self._metric = load_metric(self.spec, **self.options)
        return self._metric

    def __getstate__(self):
        state = super().__getstate__()
        state["_metric"] = None  # every process (ddp_spawn's too) builds its own
        return state

    def update(self, mt: Sequence[str], ref: Sequence[str] | None = None, src: Sequence[str] | None = None) -> None:
        metric, device = self.metric, self.scores[0].device if self.scores else self.device
        options = ScoreOptions(device=str(device), batch_size=self.batch_size, progress=False)
        with torch.no_grad():
            result = metric.score(
                mt=list(mt),
                ref=None if ref is None else list(ref),
                src=None if src is None else list(src),
                options=options,
            )
        self.scores.append(torch.tensor(result.scores, dtype=torch.float64, device=self.device))
        if self.corpus:
            refs = [[r] if isinstance(r, str) else list(r) for r in ref]
            stats = lexical.corpus_statistics(metric.family, list(mt), refs, **metric.settings)
            self.statistics += torch.as_tensor(np.asarray(stats).sum(0), dtype=torch.float64, device=self.device)

    def compute(self) -> torch.Tensor:
        """The system score over every process's rows."""
        if self.corpus:
            stats = self.statistics.cpu().numpy()
            value = lexical.score_from_statistics(self.metric.family, stats, **self.metric.settings)
            return torch.tensor(value, dtype=torch.float64)
        return dim_zero_cat(self.scores).mean()

    def segment_scores(self) -> torch.Tensor:
        """Every segment score seen by every process (rank by rank; a call every process makes, as ``compute``)."""
        with self.sync_context():
            return dim_zero_cat(self.scores).clone() if len(self.scores) else torch.zeros(0, dtype=torch.float64)
