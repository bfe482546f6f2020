"""`probe`: audit a metric for blind spots, one perturbation at a time.

For each perturbation, the metric scores the perturbed candidate and the unchanged reference
(as its own candidate) against the reference. A sound metric scores the perturbed one lower:
the table reports how often it does, and the mean drop. For a metric that reads sources, the
corpus is parallel: the reference side is perturbed and each sentence keeps its source.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from data_gen.perturbations import build, names


@dataclass
class ProbeRow:
    perturbation: str
    severity: float
    n: int
    fraction_below: float
    mean_drop: float


def probe(
    score: Callable[..., Sequence[float]],
    corpus: Sequence[str],
    n_sentences: int = 300,
    seed: int = 0,
    perturbations: Sequence[str] | None = None,
    sources: Sequence[str] | None = None,
) -> list[ProbeRow]:
    """``score(mt, ref) -> scores`` (``score(mt, ref, src)`` with ``sources``, one per corpus
    sentence); each perturbation is tried on ``n_sentences`` seeded sentences."""
    rng = random.Random(seed)
    picked = rng.sample(range(len(corpus)), min(n_sentences, len(corpus)))
    sample = [corpus[i] for i in picked]
    sample_src = None if sources is None else [sources[i] for i in picked]
    refs_all, mts_all, srcs_all, owners = [], [], [], []
    chosen = [p for p in (perturbations or names()) if p != "identity"]
    severities = {}
    for name in chosen:
        perturbation = build(name, pool=list(corpus)) if name == "unrelated" else build(name)
        severities[name] = perturbation.severity
        for k, ref in enumerate(sample):
            out = perturbation.apply(ref, random.Random(f"{seed}:{name}:{k}"))
            if out is not None and out != ref:
                refs_all.append(ref)
                mts_all.append(out)
                srcs_all.append(k)
                owners.append(name)
    if sample_src is None:
        unchanged = np.asarray(score(list(sample), list(sample)), dtype=float)
        perturbed = np.asarray(score(mts_all, refs_all), dtype=float)
    else:
        unchanged = np.asarray(score(list(sample), list(sample), sample_src), dtype=float)
        perturbed = np.asarray(score(mts_all, refs_all, [sample_src[k] for k in srcs_all]), dtype=float)
    base = unchanged[np.asarray(srcs_all, dtype=int)]
    rows = []
    owners_arr = np.asarray(owners)
    for name in chosen:
        mask = owners_arr == name
        n = int(mask.sum())
        below = float((perturbed[mask] < base[mask]).mean()) if n else float("nan")
        drop = float((base[mask] - perturbed[mask]).mean()) if n else float("nan")
        rows.append(ProbeRow(name, severities[name], n, below, drop))
    return rows


def format_probe(rows: Sequence[ProbeRow], metric: str) -> str:
    header = ["perturbation", "severity", "pairs", "below_unchanged", "mean_drop"]
    body = [
        [r.perturbation, f"{r.severity:.2f}", str(r.n), f"{r.fraction_below:.3f}", f"{r.mean_drop:.4f}"]
        for r in sorted(rows, key=lambda r: r.severity)
    ]
    widths = [max(len(x[c]) for x in [header, *body]) for c in range(len(header))]
    fmt = lambda r: "  ".join(x.ljust(w) if c == 0 else x.rjust(w) for c, (x, w) in enumerate(zip(r, widths)))  # noqa: E731
    from lightning_metrics.correlation import kendall

    tau = kendall([r.severity for r in rows], [r.mean_drop for r in rows])
    footer = (
        f"Kendall tau between severity and mean drop over perturbations: {tau:.3f} (1 = drops ordered like severities)"
    )
    return "\n".join([f"probe: {metric}", fmt(header), "  ".join("-" * w for w in widths), *map(fmt, body), footer])
