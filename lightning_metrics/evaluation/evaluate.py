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
    ``darr_threshold``. Without a ``ref`` column only reference-free metrics can be evaluated.
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

    def score_all(specs, m, r, s):
        return score_many(
            specs, m, r, s, options, num_proc=num_proc, max_length=max_length, precision=precision, spans=found
        )

    scorer = scorer or score_all
    scores = scorer(list(metrics), mt, ref, src)
    groups = list(data[group]) if group else None
    systems = list(data["system"]) if "system" in columns else None
    results = correlate_metrics(scores, human, groups, systems, bootstrap=bootstrap, seed=seed, num_proc=num_proc)
    settings = {"bootstrap": bootstrap, "seed": seed, "n_rows": len(mt)}
    ev = Evaluation(
        results=results, group_by=group, settings=settings, scores=scores, human=human.tolist(), groups=groups
    )
    if darr:
        ev.darr = darr_by_group(scores, data, groups, darr_threshold)
        settings["darr_threshold"] = darr_threshold
    if "spans" in columns:
        ev.spans = spans_by_group(found, list(data["spans"]), mt, groups, bootstrap, seed)
    return ev


def spans_by_group(found: dict, annotated: list, mt: list[str], groups, bootstrap: int, seed: int) -> dict:
    """Character-level span scores (:mod:`~lightning_metrics.evaluation.spans`) of each metric that found
    spans and of the baselines (mark nothing, every word minor), per group (``all`` without grouping)."""
    from lightning_metrics.evaluation.spans import mark_every_word, mark_nothing, span_counts, span_scores

    predicted = {"(mark nothing)": mark_nothing(mt), "(every word minor)": mark_every_word(mt), **found}
    keys = list(groups) if groups else ["all"] * len(mt)
    out = {}
    for name, spans in predicted.items():
        counts = span_counts(spans, annotated, mt)
        out[name] = {
            g: span_scores(counts[[i for i, k in enumerate(keys) if k == g]], max(bootstrap, 1), seed)
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
    header = ["metric", ev.group_by or "group", "seg_kendall", "seg_pearson", "sys_pearson", "n", "n_sys"]
    rows = []
    for metric, by_group in ev.results.items():
        for g, c in by_group.items():
            rows.append(
                [
                    metric,
                    g,
                    *(_cell(getattr(c, k), c.ci.get(k)) for k in TABLE_STATS),
                    str(c.n),
                    str(c.n_systems or "-"),
                ]
            )
        if len(by_group) > 1:
            avg = ev.average(metric)
            rows.append([metric, AVERAGE, *(_cell(avg[k], None) for k in TABLE_STATS), str(avg["n"]), ""])
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
    return "\n".join(lines)


def span_table(ev: Evaluation) -> str:
    """Error-span detection per metric and group: character-level F1 [95% CI], precision and recall, with
    severity ignored and with severity matching."""
    header = ["spans", ev.group_by or "group", "F1", "P", "R", "F1 (severity)", "P", "R"]
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
