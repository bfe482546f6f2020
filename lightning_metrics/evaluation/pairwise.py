"""Pairwise measures as the WMT metrics task computes them since 2023 (google-research/mt-metrics-eval:
``stats.py``, ``tau_optimization.py``, ``pce.py``), as plain functions of score arrays.

- :func:`tie_calibrated_accuracy` (acc_eq, Deutsch et al. 2023): the share of pairs a metric orders as
  humans do, a tie counting as agreement only with a human tie, after the metric's differences up to
  an ε are made ties; ε is the one that maximises the accuracy (mt-metrics-eval's
  ``KendallWithTiesOpt(variant='acc23')``). Pairs are taken within groups (``item``: the outputs of
  one source, WMT24's; ``system``: one system's segments; ``none``: all pairs, WMT23's), and the
  accuracy is the mean over groups.
- :func:`system_pairwise_accuracy` and :func:`soft_pairwise_accuracy` (SPA, Thompson et al. 2024,
  one minus mt-metrics-eval's pairwise confidence error) at system level.
- :func:`pairs_permutation_test`: is one metric's acc_eq above another's? (mt-metrics-eval's
  ``PairwisePermutationSigDiff``: pairwise outcomes swapped between the two, early stopping.)
- :func:`significance_clusters`: ranks from a matrix of such p-values (mt-metrics-eval's ``AssignRanks``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

GROUPINGS = ("none", "item", "system")


@dataclass(frozen=True)
class TieCalibration:
    """acc_eq at its best ε, the ε, and how many groups and pairs it counts."""

    accuracy: float
    epsilon: float
    groups: int
    pairs: int


def groups_of(n: int, grouping: str = "none", items: Sequence | None = None, systems: Sequence | None = None):
    """Row indices per group: everything (``none``), per item (source segment) or per system."""
    if grouping not in GROUPINGS:
        raise ValueError(f"grouping must be one of {GROUPINGS}, got {grouping!r}")
    if grouping == "none":
        return [np.arange(n)]
    keys = items if grouping == "item" else systems
    if keys is None:
        raise ValueError(f"grouping {grouping!r} needs the {'items' if grouping == 'item' else 'systems'} of the rows")
    members: dict = {}
    for i, key in enumerate(keys):
        members.setdefault(key, []).append(i)
    return [np.asarray(v) for v in members.values()]


def _group_pairs(h: np.ndarray, m: np.ndarray, keep: np.ndarray | None):
    """One group's pairs (i < j, in row-major order) as ``(|Δm|, agrees as is, agrees as a tie)``."""
    i, j = np.triu_indices(len(h), 1)
    if keep is not None:
        i, j = i[keep], j[keep]
    dh, dm = h[i] - h[j], m[i] - m[j]
    # concordant, or tied on both sides; a tie on one side only is no agreement
    return np.abs(dm), np.sign(dh) == np.sign(dm), dh == 0


def tie_calibrated_accuracy(
    human: Sequence[float],
    metric: Sequence[float],
    groups: list[np.ndarray] | None = None,
    sample_rate: float = 1.0,
    seed: int | None = None,
) -> TieCalibration:
    """acc_eq with its ε (module docstring). ``groups`` from :func:`groups_of` (default: one group);
    ``sample_rate`` < 1 keeps each pair with that chance, drawn as mt-metrics-eval draws them
    (``numpy``'s legacy generator, seeded with ``seed``, one draw per pair in row-major order)."""
    h, m = np.asarray(human, dtype=float), np.asarray(metric, dtype=float)
    rng = np.random.RandomState(seed) if sample_rate < 1.0 else None
    diffs, changes, start, used = [], [], 0.0, 0
    per_group = []
    for rows in groups if groups is not None else [np.arange(len(h))]:
        n = len(rows)
        keep = rng.random_sample(n * (n - 1) // 2) <= sample_rate if rng is not None else None
        diff, agree, tie = _group_pairs(h[rows], m[rows], keep)
        if len(diff):
            per_group.append((diff, agree, tie))
    for diff, agree, tie in per_group:
        weight = 1.0 / (len(diff) * len(per_group))
        start += agree.sum() * weight
        diffs.append(diff)
        changes.append((tie.astype(float) - agree) * weight)  # what making the pair a metric tie changes
        used += len(diff)
    if not per_group:
        return TieCalibration(float("nan"), 0.0, 0, 0)
    diff, change = np.concatenate(diffs), np.concatenate(changes)
    order = np.argsort(diff, kind="stable")
    diff, values = diff[order], start + np.cumsum(change[order])
    last = np.r_[np.nonzero(diff[1:] != diff[:-1])[0], len(diff) - 1]  # each threshold after all its pairs
    thresholds, taus = np.r_[0.0, diff[last]], np.r_[start, values[last]]
    if thresholds[1] == 0.0:  # metric ties already: the first threshold is 0 itself
        thresholds, taus = thresholds[1:], taus[1:]
    best = int(np.nanargmax(taus))
    return TieCalibration(float(taus[best]), float(thresholds[best]), len(per_group), used)


def accuracy_at(human, metric, epsilon: float, groups: list[np.ndarray] | None = None) -> float:
    """acc_eq at a given ε: metric differences ``<= epsilon`` are ties (mean over groups)."""
    h, m = np.asarray(human, dtype=float), np.asarray(metric, dtype=float)
    values = []
    for rows in groups if groups is not None else [np.arange(len(h))]:
        diff, agree, tie = _group_pairs(h[rows], m[rows], None)
        if len(diff):
            values.append(np.where(diff <= epsilon, tie, agree).mean())
    return float(np.mean(values)) if values else float("nan")


def system_pairwise_accuracy(human: Sequence[float], metric: Sequence[float]) -> float:
    """The share of system pairs whose difference has the same sign by metric as by humans (a tie
    on one side only is a disagreement; mt-metrics-eval's ``Agreement``)."""
    h, m = np.asarray(human, dtype=float), np.asarray(metric, dtype=float)
    i, j = np.triu_indices(len(h), 1)
    return float(np.mean(np.sign(h[i] - h[j]) == np.sign(m[i] - m[j]))) if len(i) else float("nan")


def pairwise_p_values(segment_scores: np.ndarray, permutations: int = 1000, seed: int = 4) -> np.ndarray:
    """For systems × segments scores: the permutation p-value that system i is better than j (upper
    triangle), one set of swaps shared by all pairs, in float32, as ``pce.compute_pairwise_p_values``."""
    n_sys, n_seg = segment_scores.shape
    signs = np.random.default_rng(seed).random(size=(permutations, n_seg), dtype=np.float32)
    np.rint(signs, out=signs, casting="same_kind")
    signs *= 2.0
    signs -= 1.0
    scores = segment_scores.astype(np.float32)
    totals = scores.sum(axis=1)
    partial = signs @ scores.T
    p = np.full((n_sys, n_sys), np.nan)
    for a in range(n_sys):
        for b in range(a + 1, n_sys):
            p[a, b] = np.sum(partial[:, a] - partial[:, b] >= totals[a] - totals[b]) / permutations
    return p


def soft_pairwise_accuracy(human_segments: np.ndarray, metric_segments: np.ndarray, permutations: int = 1000,
                           seed: int = 4) -> float:  # fmt: skip
    """SPA: one minus the mean absolute difference between the human and the metric p-values of every
    system pair (systems × segments matrices, every system scored on every segment)."""
    ph = pairwise_p_values(np.asarray(human_segments, dtype=float), permutations, seed)
    pm = pairwise_p_values(np.asarray(metric_segments, dtype=float), permutations, seed)
    upper = np.triu_indices(ph.shape[0], 1)
    return float(1.0 - np.mean(np.abs(ph - pm)[upper]))


def pairs_permutation_test(
    human, metric_a, metric_b, groups: list[np.ndarray] | None = None, resamples: int = 1000, seed: int = 0,
    block: int = 1000, early_min: float = 0.02, early_max: float = 0.5,
) -> tuple[float, float, int]:  # fmt: skip
    """The p-value that ``metric_b``'s acc_eq is not above ``metric_a``'s, its difference, and the
    resamples drawn: each resample swaps the two metrics' outcome on every pair with chance 1/2 (each
    metric at its own ε), stopping at a block boundary once p < ``early_min`` or p > ``early_max``."""
    h = np.asarray(human, dtype=float)
    groups = groups if groups is not None else [np.arange(len(h))]
    eps = [tie_calibrated_accuracy(h, s, groups).epsilon for s in (metric_a, metric_b)]
    outcomes = []  # per group: each metric's agreement on each pair
    for rows in groups:
        parts = [_group_pairs(h[rows], np.asarray(s, dtype=float)[rows], None) for s in (metric_a, metric_b)]
        if len(parts[0][0]):
            outcomes.append([np.where(d <= e, tie, agree).astype(float) for (d, agree, tie), e in zip(parts, eps)])

    def mean(which: list[np.ndarray]) -> float:
        return float(np.mean([w.mean() for w in which]))

    delta = mean([o[1] for o in outcomes]) - mean([o[0] for o in outcomes])
    rng, larger, k = np.random.default_rng(seed), 0, 0
    for k in range(1, resamples + 1):
        swapped_a, swapped_b = [], []
        for a, b in outcomes:
            swap = rng.random(len(a)) < 0.5
            swapped_a.append(np.where(swap, b, a))
            swapped_b.append(np.where(swap, a, b))
        larger += mean(swapped_b) - mean(swapped_a) >= delta
        if k % block == 0 and not early_min <= larger / k <= early_max:
            break
    return larger / k, delta, k


def significance_clusters(p_values: np.ndarray, alpha: float = 0.05) -> list[int]:
    """Ranks of metrics sorted best first, from ``p_values[i, j]`` (upper triangle): the p-value that
    metric ``j`` is as good as ``i``. A metric starts a new rank when some metric of the current rank
    above it beats it significantly (mt-metrics-eval's ``AssignRanks``)."""
    ranks, rank, start = [], 1, 0
    for i in range(p_values.shape[0]):
        if np.any(p_values[start:i, i] <= alpha):
            rank, start = rank + 1, i
        ranks.append(rank)
    return ranks
