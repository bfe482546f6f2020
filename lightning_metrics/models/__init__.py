"""Trainable metrics: the shared base, the BLEURT-style cross-encoder and the COMET-style models, the unified
family (a sentence score and error spans)."""

from lightning_metrics.models.base import MetricModel
from lightning_metrics.models.bleurt import BleurtRegressor
from lightning_metrics.models.comet import CometEstimator, CometReferenceless
from lightning_metrics.models.metricx import MetricXRegressor
from lightning_metrics.models.ranking import CometRanker
from lightning_metrics.models.unified import UnifiedMetric

FAMILIES = {
    cls.__name__: cls
    for cls in (BleurtRegressor, CometEstimator, CometReferenceless, CometRanker, UnifiedMetric, MetricXRegressor)
}
"""The trainable families by class name: what a checkpoint's ``metric_family`` and an export's ``family`` name."""

__all__ = [
    "FAMILIES",
    "MetricModel",
    "BleurtRegressor",
    "CometEstimator",
    "CometReferenceless",
    "CometRanker",
    "UnifiedMetric",
    "MetricXRegressor",
]
