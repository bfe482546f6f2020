"""`evaluate --protocol wmt23|wmt24`: the metrics task's table, from the measures of
:mod:`~lightning_metrics.evaluation.pairwise`, per language pair.

- ``wmt24`` (mt-metrics-eval's ``tasks.WMT24``): segment level acc_eq grouped by item (the outputs of
  one source), system level soft pairwise accuracy (SPA) on the items every system has.
- ``wmt23``: segment level acc_eq over all pairs (one group), system level pairwise accuracy and
  Pearson.

Each measure gets its significance cluster (rank 1 is the best cluster): segment level from the pairs
permutation test, system level from a permutation test that swaps the two metrics' segment scores
(each standardised), both with ``resamples`` draws and early stopping. The ε each metric's acc_eq
used is reported with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lightning_metrics.correlation import pearson
from lightning_metrics.evaluation.pairwise import (
    groups_of,
    pairs_permutation_test,
    significance_clusters,
    soft_pairwise_accuracy,
    system_pairwise_accuracy,
    tie_calibrated_accuracy,
)

PROTOCOLS = {"wmt23": ("none", ("sys_accuracy", "sys_pearson")), "wmt24": ("item", ("spa",))}


@dataclass
class ProtocolTable:
    """Per language pair and metric: ``acc_eq``, ``epsilon``, ``seg_rank`` and the system measures with
    their ranks; ``sizes`` per pair (rows, items, systems, items every system has)."""

    protocol: str
    results: dict[str, dict[str, dict]]
    sizes: dict[str, dict[str, int]]
    settings: dict

    def to_dict(self) -> dict:
        return {"protocol": self.protocol, "settings": self.settings, "sizes": self.sizes, "results": self.results}


def item_keys(lps: Sequence[str], items: Sequence) -> list[tuple]:
    return list(zip(lps, items))


def system_matrix(values: np.ndarray, systems: Sequence[str], items: Sequence) -> tuple[np.ndarray, list[str]]:
    """Systems × items of ``values`` over the items every system has (SPA needs them all)."""
    names = sorted(set(systems))
    cells: dict = {}
    for v, s, it in zip(values, systems, items):
        cells.setdefault(it, {})[s] = v
    complete = [it for it, by in cells.items() if len(by) == len(names)]
    return np.array([[cells[it][s] for it in complete] for s in names], dtype=float), names


def system_means(values: np.ndarray, systems: Sequence[str]) -> np.ndarray:
    names = sorted(set(systems))
    idx = np.array([names.index(s) for s in systems])
    return np.array([values[idx == k].mean() for k in range(len(names))])


def scores_permutation_test(fn, a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> float:
    """The p-value that ``fn(b)`` is not above ``fn(a)``: each draw swaps the two metrics' standardised
    scores cell by cell with chance 1/2 (PERM-BOTH, mt-metrics-eval's ``PermutationSigDiff``)."""
    za, zb = (a - a.mean()) / (a.std() or 1.0), (b - b.mean()) / (b.std() or 1.0)
    delta = fn(zb) - fn(za)
    rng, larger = np.random.default_rng(seed), 0
    for _ in range(resamples):
        swap = rng.random(za.shape) < 0.5
        larger += fn(np.where(swap, za, zb)) - fn(np.where(swap, zb, za)) >= delta
    return larger / resamples if resamples else float("nan")


def ranked(values: dict[str, float], p_value, alpha: float) -> dict[str, int]:
    """Significance clusters of metrics by ``values`` (best first, names breaking ties), with
    ``p_value(better, worse)`` the p-value that ``worse`` is as good as ``better``."""
    order = sorted(values, key=lambda m: (-values[m], m))
    p = np.zeros((len(order), len(order)))
    for i in range(len(order)):
        for j in range(i + 1, len(order)):
            p[i, j] = p_value(order[i], order[j])
    return dict(zip(order, significance_clusters(p, alpha)))


def wmt_table(
    protocol: str,
    scores: dict[str, Sequence[float]],
    human: Sequence[float],
    lps: Sequence[str],
    systems: Sequence[str],
    items: Sequence,
    resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    sample_rate: float = 1.0,
) -> ProtocolTable:
    """The ``protocol``'s measures per language pair (module docstring)."""
    grouping, system_measures = PROTOCOLS[protocol]
    human = np.asarray(human, dtype=float)
    results, sizes = {}, {}
    for lp in sorted(set(lps)):
        rows = np.array([i for i, x in enumerate(lps) if x == lp])
        h, sys_lp, it_lp = human[rows], [systems[i] for i in rows], [items[i] for i in rows]
        m = {name: np.asarray(v, dtype=float)[rows] for name, v in scores.items()}
        groups = groups_of(len(rows), grouping, items=it_lp)
        out = {name: {} for name in m}
        for name, values in m.items():
            tie = tie_calibrated_accuracy(h, values, groups, sample_rate, seed)
            out[name].update(acc_eq=tie.accuracy, epsilon=tie.epsilon)
        acc = {name: out[name]["acc_eq"] for name in m}
        for name, rank in ranked(acc, lambda a, b: pairs_permutation_test(
                h, m[b], m[a], groups, resamples, seed)[0], alpha).items():  # fmt: skip
            out[name]["seg_rank"] = rank
        matrix_h, names = system_matrix(h, sys_lp, it_lp)
        sizes[lp] = {
            "rows": len(rows),
            "items": len(set(it_lp)),
            "systems": len(names),
            "complete_items": matrix_h.shape[1],
        }
        for measure in system_measures:
            values = system_values(measure, h, m, sys_lp, it_lp, matrix_h)
            for name, value in values.items():
                out[name][measure] = value
            test = system_test(measure, h, m, sys_lp, it_lp, matrix_h, resamples, seed)
            for name, rank in ranked(values, test, alpha).items():
                out[name][f"{measure}_rank"] = rank
        results[lp] = out
    settings = {"grouping": grouping, "resamples": resamples, "seed": seed, "alpha": alpha, "sample_rate": sample_rate}
    return ProtocolTable(protocol, results, sizes, settings)


def system_values(measure: str, h, m: dict, systems, items, matrix_h) -> dict[str, float]:
    if measure == "spa":
        if matrix_h.shape[1] < 2:
            return {name: float("nan") for name in m}
        return {name: soft_pairwise_accuracy(matrix_h, system_matrix(v, systems, items)[0]) for name, v in m.items()}
    human_sys = system_means(h, systems)
    if measure == "sys_accuracy":
        return {name: system_pairwise_accuracy(human_sys, system_means(v, systems)) for name, v in m.items()}
    return {name: pearson(system_means(v, systems), human_sys) for name, v in m.items()}


def system_test(measure: str, h, m: dict, systems, items, matrix_h, resamples: int, seed: int):
    """``p_value(better, worse)`` for a system-level measure."""
    human_sys = system_means(h, systems)
    if measure == "spa":
        fn = lambda x: soft_pairwise_accuracy(matrix_h, x)  # noqa: E731
        cells = {name: system_matrix(v, systems, items)[0] for name, v in m.items()}
    elif measure == "sys_accuracy":
        fn = lambda x: system_pairwise_accuracy(human_sys, system_means(x, systems))  # noqa: E731
        cells = m
    else:
        fn = lambda x: pearson(system_means(x, systems), human_sys)  # noqa: E731
        cells = m
    return lambda better, worse: scores_permutation_test(fn, cells[worse], cells[better], resamples, seed)


def format_protocol(table: ProtocolTable) -> str:
    """The task's table: per language pair, each metric's acc_eq (its ε) and system measure, each with
    its significance cluster; then each metric's mean over the tasks (pairs × levels)."""
    measures = PROTOCOLS[table.protocol][1]
    names = {"spa": "SPA", "sys_accuracy": "sys acc", "sys_pearson": "sys Pearson"}
    header = ["metric", "acc_eq", "ε", "rank", *[c for m in measures for c in (names[m], "rank")]]
    settings = table.settings
    lines = [
        f"{table.protocol}: segment acc_eq grouped by {settings['grouping']}, {settings['resamples']} permutation "
        f"resamples, clusters at p <= {settings['alpha']}"
    ]
    means: dict[str, list[float]] = {}
    for lp, by_metric in table.results.items():
        size = table.sizes[lp]
        complete = f" ({size['complete_items']} items every system has, for SPA)" if "spa" in measures else ""
        lines += ["", f"{lp}: {size['rows']} rows, {size['items']} items, {size['systems']} systems{complete}"]
        rows = []
        for metric, r in sorted(by_metric.items(), key=lambda kv: -kv[1]["acc_eq"]):
            cells = [metric, f"{r['acc_eq']:.4f}", f"{r['epsilon']:.4g}", str(r["seg_rank"])]
            for m in measures:
                cells += [f"{r[m]:.4f}", str(r[f"{m}_rank"])]
                means.setdefault(metric, []).append(r[m])
            means.setdefault(metric, []).append(r["acc_eq"])
            rows.append(cells)
        lines += _aligned(header, rows)
    lines += ["", "mean over tasks (each pair and level once):"]
    lines += [f"  {m}: {np.nanmean(v):.4f}" for m, v in sorted(means.items(), key=lambda kv: -np.nanmean(kv[1]))]
    return "\n".join(lines)


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return [fmt(header), "  ".join("-" * w for w in widths), *map(fmt, rows)]
