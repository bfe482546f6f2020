"""Readers (schema-validated) and, later, Lightning data modules."""

from lightning_metrics.data.readers import ColumnMap, read_corpus, read_parallel_text, read_ratings

__all__ = ["ColumnMap", "read_corpus", "read_parallel_text", "read_ratings"]
