"""lightning-metrics: train learned evaluation metrics for generated text, and score with them."""

from lightning_metrics.errors import EncoderNotFoundError, InputError, LightningMetricsError
from lightning_metrics.version import __version__

__all__ = ["EncoderNotFoundError", "InputError", "LightningMetricsError", "__version__", "load_metric"]


def load_metric(name_or_path: str, **options):
    """A metric by exported folder or built-in name; see :func:`lightning_metrics.metrics.load_metric`."""
    from lightning_metrics.metrics import load_metric as _load

    return _load(name_or_path, **options)
