"""Trainable metrics: the shared base, the BLEURT-style cross-encoder and the COMET-style models."""

from lightning_metrics.models.base import MetricModel
from lightning_metrics.models.bleurt import BleurtRegressor
from lightning_metrics.models.comet import CometEstimator, CometReferenceless
from lightning_metrics.models.ranking import CometRanker

__all__ = ["MetricModel", "BleurtRegressor", "CometEstimator", "CometReferenceless", "CometRanker"]
