"""`evaluate`: score a ratings table with metrics, correlate with the human scores, print a table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from lightning_metrics.correlation import Correlations, correlate_metrics
from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.errors import InputError

TABLE_STATS = ("seg_kendall", "seg_pearson", "sys_pearson")
AVERAGE = "avg"


@dataclass
class Evaluation:
    """Correlations per metric and group; ``average`` holds the unweighted mean over groups."""

    results: dict[str, dict[str, Correlations]]
    group_by: str | None
    settings: dict = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict, repr=False)  # segment scores, for plots
    human: list[float] = field(default_factory=list, repr=False)
    groups: list[str] | None = field(default=None, repr=False)
    darr: dict[str, dict[str, tuple[float, int]]] = field(
        default_factory=dict
    )  # metric -> group -> (DARR Kendall, pairs)
    spans: dict = field(default_factory=dict)  # metric or baseline -> group -> SpanScores (data with spans)
    acc_eq: dict = field(default_factory=dict)  # metric -> group -> (acc_eq by item, its epsilon)
    protocol: object = None  # a ProtocolTable, with --protocol

    def average(self, metric: str) -> dict[str, float]:
        groups = self.results[metric].values()
        out = {
            k: float(np.nanmean([getattr(c, k) for c in groups]))
            if any(math.isfinite(getattr(c, k)) for c in groups)
            else math.nan
            for k in TABLE_STATS
        }
        out["n"] = sum(c.n for c in groups)
        return out

    def to_dict(self) -> dict:
        return {
            "group_by": self.group_by,
            "settings": self.settings,
            "metrics": {
                m: {
                    **{g: c.to_dict() for g, c in by_group.items()},
                    **({AVERAGE: self.average(m)} if len(by_group) > 1 else {}),
                }
                for m, by_group in self.results.items()
            },
            **(
                {
                    "darr": {
                        m: {g: {"kendall": t, "pairs": n} for g, (t, n) in by.items()} for m, by in self.darr.items()
                    }
                }
                if self.darr
                else {}
            ),
            **(
                {"spans": {m: {g: v.values for g, v in by.items()} for m, by in self.spans.items()}}
                if self.spans
                else {}
            ),
            **(
                {
                    "acc_eq": {
                        m: {g: {"acc_eq": a, "epsilon": e} for g, (a, e) in by.items()} for m, by in self.acc_eq.items()
                    }
                }
                if self.acc_eq
                else {}
            ),  # fmt: skip
            **({"wmt": self.protocol.to_dict()} if self.protocol is not None else {}),
        }


def evaluate(
    data,
    metrics: Sequence[str],
    group: str | None = "lp",
    bootstrap: int = 1000,
    seed: int = 0,
    scorer: Callable[[Sequence[str], list[str], list[str], list[str] | None], dict[str, list[float]]] | None = None,
    source: str = "data",
    num_proc: int = 1,
    options: ScoreOptions | None = None,
    max_length: int | None = None,
    precision: str | None = None,
    darr: bool = False,
    darr_threshold: float = 25.0,
    protocol: str | None = None,
    resamples: int = 1000,
) -> Evaluation:
    """Correlate each metric with ``data["score"]``, per value of the ``group`` column.

    ``data`` is a ``datasets.Dataset`` (or a dict of columns) with ``mt``, ``ref`` and
    ``score`` (and ``src`` for metrics that read it); a ``system`` column adds system-level
    correlations. ``metrics`` are metric specs (``chrf``, ``bertscore:layer=4``, a folder, ``LABEL=SPEC``),
    whose labels key the results. ``scorer(specs, mt, ref, src)`` returns segment scores per label
    (default: :func:`lightning_metrics.metrics.score_many`). ``num_proc`` processes share the lexical
    scoring and the bootstrap; ``options`` (:class:`~lightning_metrics.metrics.ScoreOptions`) and
    ``precision`` go to every metric that runs an encoder, ``max_length`` to exported ones. ``darr`` adds
    WMT's DARR Kendall over pairs of outputs of one source whose ``raw`` DA scores differ by more than
    ``darr_threshold``. Without a ``ref`` column only reference-free metrics can be evaluated. Rows of one
    item (``seg_id``, else the source or reference text, within the group) give each metric's acc_eq
    (WMT24's, grouped by item); ``protocol`` (``wmt23``, ``wmt24``: :mod:`~lightning_metrics.evaluation.protocol`)
    adds the task's table, with ``resamples`` permutation draws for its significance clusters.
    """
    from lightning_metrics.metrics import score_many

    columns = data.column_names if hasattr(data, "column_names") else list(data)
    if group is not None and group not in columns:
        raise InputError(source, f"no column {group!r} to group by; columns are {sorted(columns)}")
    if darr and "raw" not in columns:
        raise InputError(source, "--darr needs a raw column (DA scores before standardisation)")
    mt, human = list(data["mt"]), np.asarray(data["score"], dtype=float)
    ref = list(data["ref"]) if "ref" in columns else None
    src = list(data["src"]) if "src" in columns else None

    found: dict[str, list] = {}

    lower: set = set()

    def score_all(specs, m, r, s):
        return score_many(
            specs, m, r, s, options, num_proc=num_proc, max_length=max_length, precision=precision, spans=found,
            lower_is_better=lower,
        )  # fmt: skip

    scorer = scorer or score_all
    scores = scorer(list(metrics), mt, ref, src)
    scores = {k: [-v for v in values] if k in lower else values for k, values in scores.items()}  # agreement
    groups = list(data[group]) if group else None
    systems = list(data["system"]) if "system" in columns else None
    results = correlate_metrics(scores, human, groups, systems, bootstrap=bootstrap, seed=seed, num_proc=num_proc)
    settings = {"bootstrap": bootstrap, "seed": seed, "n_rows": len(mt), "negated": sorted(lower)}
    ev = Evaluation(
        results=results, group_by=group, settings=settings, scores=scores, human=human.tolist(), groups=groups
    )
    if darr:
        ev.darr = darr_by_group(scores, data, groups, darr_threshold)
        settings["darr_threshold"] = darr_threshold
    if "spans" in columns:
        ev.spans = spans_by_group(found, list(data["spans"]), mt, groups, bootstrap, seed)
    items = item_ids(data, columns)
    if items is not None:
        ev.acc_eq = acc_eq_by_group(scores, human, groups, items)
    if protocol is not None:
        from lightning_metrics.evaluation.protocol import wmt_table

        if systems is None or items is None:
            raise InputError(source, f"--protocol {protocol} needs a system column and seg_id (or src/ref) columns")
        lps = list(data["lp"]) if "lp" in columns else ["all"] * len(mt)
        ev.protocol = wmt_table(protocol, scores, human, lps, systems, items, resamples, seed)
    return ev


def item_ids(data, columns) -> list | None:
    """Which rows translate one source: ``seg_id`` (with ``lp``), else the source (or reference) text."""
    key = next((c for c in ("seg_id", "src", "ref") if c in columns), None)
    if key is None:
        return None
    lps = list(data["lp"]) if "lp" in columns else [""] * len(data[key])
    return [f"{lp}\t{k}" for lp, k in zip(lps, data[key])]


def acc_eq_by_group(scores: dict, human: np.ndarray, groups: list | None, items: list) -> dict:
    """Each metric's acc_eq grouped by item (and its ε), per group (``all`` without grouping)."""
    from lightning_metrics.evaluation.pairwise import groups_of, tie_calibrated_accuracy

    labels = groups if groups is not None else ["all"] * len(human)
    out: dict = {}
    for g in sorted(set(labels)):
        rows = np.array([i for i, x in enumerate(labels) if x == g])
        by_item = groups_of(len(rows), "item", items=[items[i] for i in rows])
        for metric, values in scores.items():
            result = tie_calibrated_accuracy(human[rows], np.asarray(values, dtype=float)[rows], by_item)
            out.setdefault(metric, {})[g] = (result.accuracy, result.epsilon)
    return out


def spans_by_group(found: dict, annotated: list, mt: list[str], groups, bootstrap: int, seed: int) -> dict:
    """Character-level span scores (:mod:`~lightning_metrics.evaluation.spans`) of each metric that found
    spans and of the baselines (mark nothing, every word minor, every character minor), per group (``all``
    without grouping)."""
    from lightning_metrics.evaluation import spans as f1

    predicted = {
        "(mark nothing)": f1.mark_nothing(mt),
        "(every word minor)": f1.mark_every_word(mt),
        "(every character minor)": f1.mark_every_character(mt),
        **found,
    }
    keys = list(groups) if groups else ["all"] * len(mt)
    out = {}
    for name, spans in predicted.items():
        counts = f1.span_counts(spans, annotated, mt)
        out[name] = {
            g: f1.span_scores(counts[[i for i, k in enumerate(keys) if k == g]], max(bootstrap, 1), seed)
            for g in sorted(set(keys))
        }
    return out


def darr_by_group(scores: dict[str, list[float]], data, groups: list[str] | None, threshold: float) -> dict:
    """WMT DARR Kendall per metric and group (``all`` without grouping), and its pair count."""
    from lightning_metrics.correlation import darr_kendall
    from lightning_metrics.data.ranking import darr_pairs

    rows = {
        k: list(data[k])
        for k in ("lp", "src", "ref", "mt", "raw")
        if k in (data.column_names if hasattr(data, "column_names") else data)
    }
    rows.setdefault("src", rows.get("ref") or [""] * len(rows["mt"]))
    by_group: dict[str, list[tuple[int, int]]] = {}
    for pairs in darr_pairs(rows, "raw", threshold).values():
        for better, worse in pairs:
            by_group.setdefault(groups[better] if groups else "all", []).append((better, worse))
    out = {}
    for metric, values in scores.items():
        v = np.asarray(values, dtype=float)
        out[metric] = {
            g: (darr_kendall(v[[b for b, _ in p]], v[[w for _, w in p]]), len(p)) for g, p in sorted(by_group.items())
        }
    return out


def plot_evaluation(ev: Evaluation, out: str) -> list:
    """``evaluate --plot DIR``: a scatter plot per group and a Kendall bar chart with the bootstrap CIs."""
    from lightning_metrics.evaluation.plots import kendall_bars, scatter_plots

    table = {
        m: {g: (c.seg_kendall, *c.ci.get("seg_kendall", (math.nan, math.nan))) for g, c in by_group.items()}
        for m, by_group in ev.results.items()
    }
    return [*scatter_plots(ev.scores, ev.human, ev.groups, out), kendall_bars(table, out)]


def _cell(value: float, ci: tuple[float, float] | None) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:.4f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and all(map(math.isfinite, ci)) else "")


def format_table(ev: Evaluation) -> str:
    """An aligned text table: metric x group, with segment Kendall/Pearson, system Pearson and n."""
    if ev.protocol is not None:
        from lightning_metrics.evaluation.protocol import format_protocol

        return format_protocol(ev.protocol)
    header = ["metric", ev.group_by or "group", "seg_kendall", "seg_pearson", "sys_pearson", "acc_eq", "n", "n_sys"]
    rows = []
    for metric, by_group in ev.results.items():
        for g, c in by_group.items():
            acc = ev.acc_eq.get(metric, {}).get(g if ev.group_by else "all")
            rows.append(
                [
                    metric,
                    g,
                    *(_cell(getattr(c, k), c.ci.get(k)) for k in TABLE_STATS),
                    _cell(acc[0], None) if acc else "-",
                    str(c.n),
                    str(c.n_systems or "-"),
                ]
            )
        if len(by_group) > 1:
            avg = ev.average(metric)
            accs = [a for a, _ in ev.acc_eq.get(metric, {}).values()]
            mean_acc = _cell(float(np.mean(accs)), None) if accs else "-"
            rows.append([metric, AVERAGE, *(_cell(avg[k], None) for k in TABLE_STATS), mean_acc, str(avg["n"]), ""])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    lines = [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]
    if ev.darr:
        lines += [
            "",
            "DARR Kendall (pairs of outputs of one source whose raw scores differ by more than "
            f"{ev.settings['darr_threshold']:g}):",
        ]
        lines += [
            f"  {m}  " + "  ".join(f"{g}: {t:.4f} ({n} pairs)" for g, (t, n) in by.items()) for m, by in ev.darr.items()
        ]
    if ev.spans:
        lines += ["", span_table(ev)]
    if ev.settings.get("bootstrap"):
        lines.append(
            f"[brackets]: 95% bootstrap CI, {ev.settings['bootstrap']} segment resamples, seed {ev.settings['seed']}"
        )
    if ev.acc_eq:
        lines.append(
            "acc_eq: WMT24's tie-calibrated pairwise accuracy, pairs of outputs of one item (--protocol: the ε)"
        )
    if ev.settings.get("negated"):
        lines.append(f"lower is better for {', '.join(ev.settings['negated'])}: correlated with its scores negated")
    return "\n".join(lines)


def span_table(ev: Evaluation) -> str:
    """Error-span detection per metric and group: character-level F1 [95% CI], precision and recall, with
    severity ignored, with severity matching, and as WMT23 scored them (half credit, omissions)."""
    header = ["spans", ev.group_by or "group", "F1", "P", "R", "F1 (severity)", "P", "R", "F1 (WMT23)", "P", "R"]
    rows = []
    for name, by_group in ev.spans.items():
        for g, scores in by_group.items():
            cells = []
            for variant in scores.values.values():
                cells += [_cell(variant["f1"], (variant["f1_low"], variant["f1_high"]))]
                cells += [f"{variant['precision']:.4f}", f"{variant['recall']:.4f}"]
            rows.append([name, g, *cells])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *map(fmt, rows)])
