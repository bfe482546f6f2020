"""Training: ``fit | validate | test`` through LightningCLI (:mod:`.lightning_cli`), config checks
(:mod:`.config_checks`), kill-safe checkpoints (:mod:`.resume`), and export of a checkpoint as a
metric folder (:mod:`.export`, whose :class:`ExportBest` a config adds to its callbacks)."""

from lightning_metrics.training.export import ExportBest, export_checkpoint

__all__ = ["ExportBest", "export_checkpoint"]
