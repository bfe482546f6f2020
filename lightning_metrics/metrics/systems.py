"""Scoring several systems at once, and printing the result: a table split by system."""

from __future__ import annotations

from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.base import Metric, ScoreResult
from lightning_metrics.tables import take_rows


def score_systems(
    metric: Metric, systems: dict[str, list[str]], ref=None, src=None, **kwargs
) -> dict[str, ScoreResult]:
    """Score several systems' outputs in one pass: ``{system: result}``.

    ``ref``/``src`` are one list shared by all systems, a ``{system: list}`` dict, or None.
    One call sees every system, so a learned metric embeds each shared source and reference
    once. Each system's score is the metric's own system score over its rows (corpus BLEU
    for BLEU). ``kwargs`` go to ``metric.score`` (``options``, ``mc_dropout``, ``seed``, ``multi_ref``).
    """

    def of(value, name):
        return value.get(name) if isinstance(value, dict) else value

    names = list(systems)
    refs, srcs = [of(ref, n) for n in names], [of(src, n) for n in names]
    for name, r, x in zip(names, refs, srcs):
        for kind, values in (("ref", r), ("src", x)):
            if values is not None and len(values) != len(systems[name]):
                raise LightningMetricsError(
                    f"inputs differ in length: {len(systems[name])} lines in {name}, {len(values)} {kind} lines"
                )
    joined = lambda parts: None if any(p is None for p in parts) else [t for p in parts for t in p]  # noqa: E731
    result = metric.score(mt=[t for n in names for t in systems[n]], ref=joined(refs), src=joined(srcs), **kwargs)
    out, start = {}, 0
    for name, r, x in zip(names, refs, srcs):
        end = start + len(systems[name])
        scores = result.scores[start:end]
        extra = {
            k: v[start:end] for k, v in result.extra.items() if isinstance(v, list) and len(v) == len(result.scores)
        }  # e.g. std
        start = end
        columns = metric.columns(systems[name], r, x)
        out[name] = ScoreResult(
            scores=scores, system_score=metric.system_score(scores, columns), signature=result.signature, extra=extra
        )
    return out


def systems_from_table(data) -> tuple[dict[str, list[str]], dict[str, list[str] | None], dict[str, list[str] | None]]:
    """Split a ratings table into per-system mt, ref and src lists (``system`` column, else one system).

    A table without ``ref`` (or ``src``) gives None for that field; whether the metric needs it
    is checked by the reader's ``required`` columns.
    """
    table = data.to_dict() if hasattr(data, "to_dict") else dict(data)
    n = len(table["mt"])
    systems = [str(s) for s in table.get("system", ["data"] * n)]
    split = {}
    for column in ("mt", "ref", "src"):
        values = table.get(column)
        per: dict[str, list[str]] = {}
        if values is not None:
            for name, value in zip(systems, values):
                per.setdefault(name, []).append(value)
        split[column] = per
    names = list(split["mt"])
    return split["mt"], {n: split["ref"].get(n) for n in names}, {n: split["src"].get(n) for n in names}


def format_scores(results: dict[str, ScoreResult], quiet: bool = False, only_system: bool = False) -> str:
    """COMET-style text: a line per segment (unless ``quiet``/``only_system``), a line per system."""
    lines = []
    for system, result in results.items():
        if not (quiet or only_system):
            std = result.extra.get("std")
            lines += [
                f"{system}\tSegment {i}\tscore: {s:.4f}" + (f"\tstd: {std[i]:.4f}" if std else "")
                for i, s in enumerate(result.scores)
            ]
        lines.append(f"{system}\tscore: {result.system_score:.4f}")
    if results:
        lines.append(f"signature: {next(iter(results.values())).signature}")
    return "\n".join(lines)


def paired_systems_from_table(
    data, source: str, lp: str | None = None, system_column: str = "system"
) -> tuple[dict[str, list[str]], dict[str, list[str] | None], dict[str, list[str] | None]]:
    """:func:`systems_from_table` for paired tests: at least two systems, every one holding the same
    segments, each once, which are put in the first system's order. A segment is its
    ``lp``/``doc_id``/``seg_id`` where the table has ``seg_id``, else its source and reference text.
    ``lp`` keeps one language pair; ``system_column`` is the file's name of the system column, for errors."""
    from lightning_metrics.errors import InputError

    table = data.to_dict() if hasattr(data, "to_dict") else dict(data)
    if lp is not None:
        keep = [i for i, x in enumerate(table.get("lp") or []) if x == lp]
        if not keep:
            raise InputError(
                source, f"no rows of language pair {lp!r}" + ("" if "lp" in table else " (the table has no lp column)")
            )
        table = take_rows(table, keep)
    n = len(table["mt"])
    key_columns = [c for c in (("lp", "doc_id", "seg_id") if "seg_id" in table else ("src", "ref")) if c in table]
    if not key_columns:
        raise InputError(
            source, "a paired comparison needs seg_id, src or ref columns to match segments across systems"
        )
    systems = [str(s) for s in table.get("system", ["data"] * n)]
    rows: dict[str, dict[tuple, int]] = {}
    for i, name in enumerate(systems):
        key = tuple(str(table[c][i]) for c in key_columns)
        if key in rows.setdefault(name, {}):
            raise InputError(source, f"system {name!r} has segment {dict(zip(key_columns, key))} twice", row=i + 2)
        rows[name][key] = i
    names = list(rows)
    _two_or_more(names, source, "system" in table, system_column, lp)
    order = list(rows[names[0]])
    for name in names[1:]:
        if set(rows[name]) != set(order):
            missing = len(set(order) - set(rows[name]))
            raise InputError(
                source,
                f"system {name!r} does not cover the same segments as {names[0]!r} ({missing} missing, "
                f"{len(set(rows[name]) - set(order))} extra): a paired test needs the same segments",
            )
    pick = lambda column, name: None if column not in table else [table[column][rows[name][k]] for k in order]  # noqa: E731
    return (
        {n_: pick("mt", n_) for n_ in names},
        {n_: pick("ref", n_) for n_ in names},
        {n_: pick("src", n_) for n_ in names},
    )


def _two_or_more(names: list[str], source: str, has_column: bool, column: str, lp: str | None) -> None:
    """One line naming the file and the column it looked in, when a comparison finds fewer than two systems."""
    from lightning_metrics.errors import InputError

    if len(names) < 2:
        looked = f"column {column!r}" if has_column else f"no column {column!r}"
        found = f"{len(names)} system ({names[0]!r})" if names else "no system"
        where = f"{looked}, lp {lp}" if lp else looked
        raise InputError(source, f"found {found} ({where}); a comparison needs two or more")
