"""Meta-evaluation: how well metric scores agree with human ratings.

Segment level: Pearson, Spearman and Kendall tau-b over segments. System level: the mean per
system, then Pearson and Kendall across systems. Everything can be grouped by a column (for
example ``lp``), and seeded bootstrap 95% confidence intervals resample segments. For
relative-ranking data, :func:`darr_kendall` is WMT's DARR variant.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Iterator, Sequence

import numpy as np
from scipy import stats

from lightning_metrics.parallel import map_chunks

BOOTSTRAP_STATS = ("seg_kendall", "seg_pearson", "sys_pearson", "sys_kendall")  # Spearman: point estimate only


def _finite(value) -> float:
    value = float(value)
    return value if math.isfinite(value) else float("nan")


def _quiet(fn, x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) != len(y):
        raise ValueError(f"length mismatch: {len(x)} metric scores, {len(y)} human scores")
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(fn(x, y)[0])


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson r; NaN when either side is constant or has fewer than two values."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) != len(y):
        raise ValueError(f"length mismatch: {len(x)} metric scores, {len(y)} human scores")
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    xc, yc = x - x.mean(), y - y.mean()  # elementwise sums, not BLAS: threaded BLAS is slower here
    return _finite(np.clip((xc * yc).sum() / math.sqrt((xc * xc).sum() * (yc * yc).sum()), -1.0, 1.0))


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rho; NaN when either side is constant."""
    return _quiet(stats.spearmanr, x, y)


def kendall(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall tau-b (ties corrected), as ``scipy.stats.kendalltau``."""
    return _quiet(lambda a, b: stats.kendalltau(a, b, variant="b"), x, y)


@dataclass
class Correlations:
    """Correlations for one group; ``ci`` maps a statistic name to its (low, high) interval."""

    n: int
    seg_kendall: float
    seg_pearson: float
    seg_spearman: float
    n_systems: int = 0
    sys_pearson: float = float("nan")
    sys_kendall: float = float("nan")
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci"] = {k: list(v) for k, v in self.ci.items()}
        return d


def correlate(
    metric: Sequence[float],
    human: Sequence[float],
    systems: Sequence[str] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
) -> Correlations:
    """Segment correlations, system-level ones when ``systems`` is given, and bootstrap CIs."""
    m, h = np.asarray(metric, dtype=float), np.asarray(human, dtype=float)
    if len(m) != len(h):
        raise ValueError(f"length mismatch: {len(m)} metric scores, {len(h)} human scores")
    out = Correlations(n=len(m), seg_kendall=kendall(m, h), seg_pearson=pearson(m, h), seg_spearman=spearman(m, h))
    sys_idx = None
    if systems is not None:
        names, sys_idx = np.unique(np.asarray(systems, dtype=object).astype(str), return_inverse=True)
        out.n_systems = len(names)
        ms, hs = _system_means(m, h, sys_idx, len(names))
        out.sys_pearson, out.sys_kendall = pearson(ms, hs), kendall(ms, hs)
    if bootstrap > 0:
        out.ci = bootstrap_ci(m, h, sys_idx, bootstrap, seed)
    return out


def _system_means(m: np.ndarray, h: np.ndarray, sys_idx: np.ndarray, n_sys: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(sys_idx, minlength=n_sys)
    keep = counts > 0
    ms = np.bincount(sys_idx, weights=m, minlength=n_sys)[keep] / counts[keep]
    hs = np.bincount(sys_idx, weights=h, minlength=n_sys)[keep] / counts[keep]
    return ms, hs


def resample_rows(n: int, resamples: int, seed: int, clusters: Sequence | None = None) -> Iterator[np.ndarray]:
    """``resamples`` bootstrap draws of row indices, one at a time: rows with replacement, or whole
    ``clusters`` (a document or source id per row) with replacement, every row of a drawn cluster taken
    (the rows of one document are not independent; a row bootstrap makes their intervals too narrow)."""
    rng = np.random.default_rng(seed)
    if clusters is None:
        for _ in range(resamples if n else 0):
            yield rng.integers(0, n, size=n)
        return
    members: dict = {}
    for i, c in enumerate(clusters):
        members.setdefault(c, []).append(i)
    groups = [np.asarray(v) for v in members.values()]
    for _ in range(resamples):
        yield np.concatenate([groups[k] for k in rng.integers(0, len(groups), len(groups))])


def bootstrap_ci(
    metric: np.ndarray,
    human: np.ndarray,
    sys_idx: np.ndarray | None,
    n_resamples: int,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals from ``n_resamples`` segment resamples (with replacement).

    Covers :data:`BOOTSTRAP_STATS`. System-level intervals recompute each system's mean from
    the resampled segments. The same ``seed`` gives the same intervals.
    """
    rng = np.random.default_rng(seed)
    n = len(metric)
    draws: dict[str, list[float]] = {k: [] for k in BOOTSTRAP_STATS if sys_idx is not None or k.startswith("seg")}
    n_sys = int(sys_idx.max()) + 1 if sys_idx is not None else 0
    for _ in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        m, h = metric[idx], human[idx]
        draws["seg_kendall"].append(kendall(m, h))
        draws["seg_pearson"].append(pearson(m, h))
        if sys_idx is not None:
            ms, hs = _system_means(m, h, sys_idx[idx], n_sys)
            draws["sys_pearson"].append(pearson(ms, hs))
            draws["sys_kendall"].append(kendall(ms, hs))
    tail = (1 - confidence) / 2 * 100
    out = {}
    for k, values in draws.items():
        arr = np.asarray(values)
        arr = arr[np.isfinite(arr)]
        out[k] = (
            (float(np.percentile(arr, tail)), float(np.percentile(arr, 100 - tail)))
            if len(arr)
            else (math.nan, math.nan)
        )
    return out


def _correlate_task(tasks: list[tuple]) -> list[Correlations]:
    return [correlate(*task) for task in tasks]


def correlate_metrics(
    metrics: dict[str, Sequence[float]],
    human: Sequence[float],
    groups: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    num_proc: int = 1,
) -> dict[str, dict[str, Correlations]]:
    """:func:`correlate` per group (sorted group names; one group ``"all"`` when ``groups`` is None)
    for several metrics at once: ``{metric: {group: Correlations}}``.

    With ``num_proc > 1`` and bootstrapping on, the (metric, group) cells run in parallel
    processes; the numbers equal a serial run's (every cell uses ``seed``).
    """
    h = np.asarray(human, dtype=float)
    g = np.full(len(h), "all", dtype=object) if groups is None else np.asarray(groups, dtype=object).astype(str)
    s = None if systems is None else np.asarray(systems, dtype=object).astype(str)
    names = sorted(set(g))
    masks = {name: g == name for name in names}
    tasks, cells = [], []
    for metric_name, scores in metrics.items():
        m = np.asarray(scores, dtype=float)
        if len(m) != len(h):
            raise ValueError(f"length mismatch: {len(m)} {metric_name} scores, {len(h)} human scores")
        for name in names:
            mask = masks[name]
            tasks.append((m[mask], h[mask], None if s is None else s[mask], bootstrap, seed))
            cells.append((metric_name, name))
    results = map_chunks(_correlate_task, tasks, num_proc if bootstrap else 1, min_chunk=1)
    out: dict[str, dict[str, Correlations]] = {m: {} for m in metrics}
    for (metric_name, name), result in zip(cells, results):
        out[metric_name][name] = result
    return out


def darr_kendall(better: Sequence[float], worse: Sequence[float]) -> float:
    """WMT DARR Kendall-like tau over relative-ranking pairs: (concordant - discordant) / total.

    Pair i is concordant when the metric scores the human-preferred output higher
    (``better[i] > worse[i]``); a tie counts as discordant, as in WMT's DARR.
    """
    b, w = np.asarray(better, dtype=float), np.asarray(worse, dtype=float)
    if len(b) != len(w):
        raise ValueError(f"length mismatch: {len(b)} better vs {len(w)} worse scores")
    if not len(b):
        return math.nan
    concordant = int((b > w).sum())
    return (concordant - (len(b) - concordant)) / len(b)


def correlations_by_group(rows: np.ndarray, lp_names: Sequence[str]) -> dict[str, float]:
    """What validation logs: Kendall/Pearson/Spearman per language pair and averaged, and
    system-level Pearson (the mean of each system's scores against its mean human rating).
    Groups named ``source:lp`` (several training sources) are also averaged per source, as
    ``kendall/<source>``: a checkpoint can be chosen on the source that resembles the target.

    ``rows`` are ``[index, score, human, lp id, system id]``; ids of -1 mean unknown.
    """
    out: dict[str, float] = {}
    per = {"kendall": [], "pearson": [], "spearman": [], "sys_pearson": []}
    by_source: dict[str, list[float]] = {}
    for lp in np.unique(rows[:, 3]):
        sel = rows[rows[:, 3] == lp]
        name = lp_names[int(lp)] if 0 <= lp < len(lp_names) else "all"
        for stat, fn in (("kendall", kendall), ("pearson", pearson), ("spearman", spearman)):
            value = fn(sel[:, 1], sel[:, 2])
            per[stat].append(value)
            if len(lp_names) > 1:
                out[f"{stat}/{name}"] = value
            if ":" in name:
                by_source.setdefault(f"{stat}/{name.split(':', 1)[0]}", []).append(value)
        systems = sel[:, 4]
        if (systems >= 0).all() and len(np.unique(systems)) > 1:
            ids = np.unique(systems)
            ms = [sel[systems == s, 1].mean() for s in ids]
            hs = [sel[systems == s, 2].mean() for s in ids]
            per["sys_pearson"].append(pearson(ms, hs))
    for stat, values in [*per.items(), *by_source.items()]:
        finite = [v for v in values if math.isfinite(v)]
        if finite:
            out[stat] = float(np.mean(finite))
    return out
