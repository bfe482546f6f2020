"""Perturbations by family, each registered by name (the names recipes use)."""

from data_gen.perturbations import anchors, deletion, failures, negation, reordering, substitution  # noqa: F401
from data_gen.perturbations.base import REGISTRY, Perturbation, detokenize, tokenize
from data_gen.perturbations.compound import Compound, combined_severity

__all__ = ["REGISTRY", "Compound", "Perturbation", "build", "combined_severity", "detokenize", "names", "tokenize"]


def names() -> list[str]:
    """Every registered perturbation name."""
    return sorted(REGISTRY)


def build(name: str, **options) -> Perturbation:
    """The perturbation registered as ``name``; an unknown name lists the known ones."""
    from lightning_metrics.errors import LightningMetricsError

    if name not in REGISTRY:
        raise LightningMetricsError(f"unknown perturbation {name!r}; known: {', '.join(names())}")
    return REGISTRY[name](**options)
