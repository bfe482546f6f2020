"""Trainable metrics on one LightningModule base."""

from lightning_metrics.models.base import MetricModel
from lightning_metrics.models.bleurt import BleurtRegressor

__all__ = ["BleurtRegressor", "MetricModel"]
