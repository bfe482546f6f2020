"""The metric spec: how every command and :func:`~lightning_metrics.metrics.load_metric` name a metric.

- a built-in, ``NAME[:key=value,...]``: ``chrf``, ``chrf:word_order=2``,
  ``bertscore:model=multilingual-e5-small,layer=7,idf=true``; the keys of each are
  :data:`~lightning_metrics.metrics.builtin.OPTIONS`, values are read as YAML (``true``, ``4``, text);
- an exported metric folder, ``checkpoints/NAME``, or a hub id whose snapshot holds one
  (``org/name[@revision]``, through Hugging Face's cache: :mod:`lightning_metrics.storage.hub`);
- either of them labelled, ``LABEL=SPEC``: ``mine=checkpoints/NAME``, ``e5=bertscore:model=multilingual-e5-small``.

An unknown name or key, or a bad value, is one line naming it. Built-ins record their spec in their
signature (``spec:bertscore_f:layer=7``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import yaml

from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.builtin import (
    builtin_names,
    canonical_name,
    checked_options,
    family_of_name,
    is_builtin_name,
)
from lightning_metrics.storage.artifact import is_exported, read_export
from lightning_metrics.storage.hub import is_hub_id, resolve_hub_id

LABEL = re.compile(r"[A-Za-z0-9][\w.+-]*")


@dataclass(frozen=True)
class MetricSpec:
    """A parsed spec: a built-in ``name`` with its ``options``, or an exported ``folder``; ``label``
    keys its results (the spec as given, or the ``LABEL`` of ``LABEL=SPEC``)."""

    text: str
    label: str
    name: str | None = None
    options: dict = field(default_factory=dict)
    folder: str | None = None

    @property
    def is_builtin(self) -> bool:
        return self.folder is None


def parse_spec(text: str | Path | MetricSpec) -> MetricSpec:
    """The :class:`MetricSpec` of ``text`` (see the module docstring); one line when it names nothing."""
    if isinstance(text, MetricSpec):
        return text
    text = str(text)
    if is_exported(text):
        return MetricSpec(text, text, folder=text)
    label, equals, rest = text.partition("=")
    if equals and LABEL.fullmatch(label) and (_builtin_base(rest) or "/" in rest or Path(rest).exists()):
        return replace(parse_spec(rest), text=text, label=label)  # LABEL=SPEC; a bad SPEC names itself
    base, colon, given = text.partition(":")
    if is_builtin_name(base):
        name = canonical_name(base)
        options = checked_options(family_of_name(name), name, _options(text, given) if colon else {})
        return MetricSpec(text, text, name, options)  # checked here, with no metric built
    if Path(text).exists():
        read_export(text)  # raises the precise reason (not a folder, no metadata, ...)
    if is_hub_id(text):
        return MetricSpec(text, text, folder=hub_export(text))
    raise LightningMetricsError(
        f"unknown metric {text!r}: not an exported metric folder, nor a built-in metric {builtin_names()} "
        "(options after a colon: bertscore:layer=4)"
    )


def hub_export(text: str) -> str:
    """The snapshot folder of the hub id ``text`` (storage/hub), which must hold an exported metric."""
    try:
        folder = resolve_hub_id(text).folder
    except LightningMetricsError as e:
        raise LightningMetricsError(
            f"unknown metric {text!r}: no folder here, nor a built-in; as a hub id: {e}"
        ) from None
    if not is_exported(folder):
        name = text.split("/")[-1].split("@")[0]
        raise LightningMetricsError(
            f"{text} ({folder}) holds no exported metric; a COMET, BLEURT or MetricX checkpoint is imported first: "
            f"lightning-metrics import {text} --out checkpoints/{name}"
        )
    return str(folder)


def parse_specs(texts: Sequence[str | MetricSpec]) -> list[MetricSpec]:
    """Every spec parsed, before any work; two with one label are one line asking for ``LABEL=``."""
    specs = [parse_spec(t) for t in texts]
    labels = [s.label for s in specs]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise LightningMetricsError(f"metrics need distinct names, {twice[0]!r} is given twice: label one as NAME=SPEC")
    return specs


def _builtin_base(text: str) -> bool:
    return is_builtin_name(text.partition(":")[0])


def _options(text: str, given: str) -> dict:
    options = {}
    for item in given.split(","):
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise LightningMetricsError(f"metric {text!r}: options are key=value, separated by commas")
        try:
            options[key.strip()] = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError:
            options[key.strip()] = value
    return options


def short_label(spec: MetricSpec) -> str:
    """A label fit for a file name: the given ``LABEL``, else a folder's name, else the spec."""
    if spec.label != spec.text or spec.folder is None:
        return spec.label
    return Path(spec.folder).name
