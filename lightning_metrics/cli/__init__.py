"""The ``lightning-metrics`` command: :func:`main` (:mod:`.main`) and one module per group of
subcommands; :mod:`.quickstart` runs the whole product on the embedded defaults."""

from lightning_metrics.cli.main import main

__all__ = ["main"]
