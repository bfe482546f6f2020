"""MetricX's input: one text from a template over the row's fields, tokenised to ``max_length`` with
its final end-of-sequence token removed, as google-research/metricx's ``predict.py`` builds it.

- MetricX-23: ``candidate: {mt} reference: {ref}``, or for its QE models ``candidate: {mt} source: {src}``;
- MetricX-24 (hybrid, one model): ``source: {src} candidate: {mt} reference: {ref}`` with both (mode
  ``both``), with the source left empty (``reference``), or without the reference part (``qe``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from lightning_metrics.errors import LightningMetricsError

VERSIONS = ("23", "24")
MODES = {"23": ("reference", "qe"), "24": ("both", "reference", "qe")}
MAX_INPUT_LENGTH = {"23": 1024, "24": 1536}  # the lengths the models were trained with
MODES_HELP = "; ".join(f"MetricX-{v}: {', '.join(m)}" for v, m in MODES.items())


def check_template(version: str, mode: str) -> None:
    if str(version) not in VERSIONS:
        raise LightningMetricsError(f"MetricX version {version!r}: choose {' or '.join(VERSIONS)}")
    if mode not in MODES[str(version)]:
        raise LightningMetricsError(f"MetricX-{version} mode {mode!r}: choose one of {', '.join(MODES[str(version)])}")


def template_fields(version: str, mode: str) -> tuple[str, ...]:
    """The fields a version and mode read (in the scorer's order)."""
    check_template(version, mode)
    if mode == "qe":
        return ("src", "mt")
    return ("mt", "ref") if mode == "reference" else ("src", "mt", "ref")


def template_text(version: str, mode: str, row: dict) -> str:
    """One row's input text (module docstring); the strings are joined exactly as ``predict.py`` joins them."""
    mt = row["mt"]
    if str(version) == "23":
        return "candidate: " + mt + (" source: " + row["src"] if mode == "qe" else " reference: " + row["ref"])
    source = "" if mode == "reference" else row["src"]
    text = "source: " + source + " candidate: " + mt
    return text if mode == "qe" else text + " reference: " + row["ref"]


@dataclass
class TemplateInputs:
    """Token ids per row (end-of-sequence removed) and how many rows were cut to ``max_length``."""

    ids: list[list[int]]
    truncated: int


def encode_template(tokenizer, version: str, mode: str, columns: dict[str, Sequence[str]], max_length: int):
    """The rows of ``columns`` as MetricX tokenises them: truncated to ``max_length`` tokens (the
    end-of-sequence token included), then the last token removed."""
    fields = template_fields(version, mode)
    n = len(columns["mt"])
    texts = [template_text(version, mode, {f: columns[f][i] for f in fields}) for i in range(n)]
    full = tokenizer(texts, verbose=False)["input_ids"]
    cut = tokenizer(texts, max_length=max_length, truncation=True)["input_ids"]
    return TemplateInputs([ids[:-1] for ids in cut], sum(len(f) > max_length for f in full))
