"""lightning-metrics: train learned evaluation metrics for generated text, and score with them."""

__version__ = "0.1.0"

from lightning_metrics.errors import EncoderNotFoundError, InputError, LightningMetricsError  # noqa: E402

__all__ = ["EncoderNotFoundError", "InputError", "LightningMetricsError", "__version__"]
