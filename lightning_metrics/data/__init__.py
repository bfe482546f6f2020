"""Reading data: validated readers here; the Lightning data modules in ``modules`` and ``ranking``."""

from lightning_metrics.data.readers import ColumnMap, read_corpus, read_parallel_text, read_rating_table, read_ratings

__all__ = ["ColumnMap", "read_corpus", "read_parallel_text", "read_rating_table", "read_ratings"]
