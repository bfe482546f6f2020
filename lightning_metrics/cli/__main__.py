"""``python -m lightning_metrics.cli``: the same as the ``lightning-metrics`` command."""

import sys

from lightning_metrics.cli.main import main

sys.exit(main())
