"""User-facing errors: each one is a single line that names the input and the problem."""

from __future__ import annotations


class LightningMetricsError(Exception):
    """Base class for errors the CLI prints as one line, without a traceback."""


class InputError(LightningMetricsError, ValueError):
    """Bad input data: names the file, the 1-based row (when there is one) and the problem."""

    def __init__(self, source: str, problem: str, row: int | None = None):
        self.source, self.problem, self.row = str(source), problem, row
        where = f"{self.source}: row {row}" if row is not None else self.source
        super().__init__(f"{where}: {problem}")


class EncoderNotFoundError(LightningMetricsError, OSError):
    """An encoder name or path that resolved to nothing; lists what was tried."""
