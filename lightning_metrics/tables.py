"""Column tables: ``{column: list of values}`` with one value per row in every column, the shape
the readers return and the data modules, metrics and reports pass on."""

from __future__ import annotations

from typing import Iterable, Sequence


def n_rows(table: dict[str, Sequence]) -> int:
    """The number of rows (0 for a table without columns)."""
    return len(next(iter(table.values()))) if table else 0


def take_rows(table: dict[str, Sequence], rows: Iterable[int]) -> dict[str, list]:
    """The given rows of every column, in the given order."""
    rows = list(rows)
    return {name: [values[i] for i in rows] for name, values in table.items()}


def concat_tables(parts: list[dict[str, list]]) -> dict[str, list]:
    """Tables stacked row-wise; a column some tables lack is dropped."""
    parts = [p for p in parts if p]
    if not parts:
        return {}
    keys = [k for k in parts[0] if all(k in p for p in parts)]
    return {k: [v for p in parts for v in p[k]] for k in keys}
