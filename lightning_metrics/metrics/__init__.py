"""What a metric is, and the one place that turns a spec into one.

- :mod:`~lightning_metrics.metrics.base`: :class:`Metric`, :class:`ScoreResult`, :class:`Signature`;
- :mod:`~lightning_metrics.metrics.spec`: the metric spec every command takes (``NAME[:key=value,...]``,
  a folder, ``LABEL=SPEC``);
- :mod:`~lightning_metrics.metrics.builtin`: BLEU, chrF, ROUGE, BERTScore and their options;
- :mod:`~lightning_metrics.metrics.learned`: exported metric folders;
- :mod:`~lightning_metrics.metrics.ensemble` and :mod:`~lightning_metrics.metrics.ensemble_export`:
  several metrics averaged, as one folder;
- :mod:`~lightning_metrics.metrics.systems` and :mod:`~lightning_metrics.metrics.rerank`: scoring
  several systems at once, and choosing the best of N candidates.

Everything that scores (the CLI, ``evaluate``, ``probe``, the benchmarks) asks :func:`load_metric`
or :func:`score_many`.
"""

from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.metrics.base import Metric, ScoreResult, Signature
from lightning_metrics.metrics.builtin import builtin_names
from lightning_metrics.metrics.loading import load_metric, metric_inputs, score_many
from lightning_metrics.metrics.spec import MetricSpec, parse_spec, parse_specs

__all__ = [
    "Metric",
    "MetricSpec",
    "ScoreOptions",
    "ScoreResult",
    "Signature",
    "builtin_names",
    "load_metric",
    "metric_inputs",
    "parse_spec",
    "parse_specs",
    "score_many",
]
