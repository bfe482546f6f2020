"""The cache folder, one place for it: built encoders, signal values, WordNet's example sentences.

``$LIGHTNING_METRICS_CACHE``, else ``$XDG_CACHE_HOME/lightning-metrics``, else
``~/.cache/lightning-metrics``. A path that names a file (or a file inside it where a folder must go)
is one line naming the variable and the path.
"""

from __future__ import annotations

import os
from pathlib import Path

from lightning_metrics.errors import LightningMetricsError

VARIABLE = "LIGHTNING_METRICS_CACHE"


def cache_root() -> Path:
    """The cache folder (see the module docstring); it need not exist yet."""
    if os.environ.get(VARIABLE):
        root = Path(os.environ[VARIABLE]).expanduser()
        where = f"{VARIABLE}={os.environ[VARIABLE]}"
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "lightning-metrics"
        where = str(root)
    if root.exists() and not root.is_dir():
        raise LightningMetricsError(f"{where}: is a file, but the cache must be a folder; name a folder")
    return root


def cache_dir(*parts: str) -> Path:
    """``cache_root() / parts``, made if missing; one line if any part of it is a file."""
    folder = cache_root().joinpath(*parts)
    for level in [folder, *folder.parents]:
        if level.exists():
            if not level.is_dir():
                raise LightningMetricsError(f"{level}: is a file, but the cache needs a folder there ({VARIABLE})")
            break
    folder.mkdir(parents=True, exist_ok=True)
    return folder
