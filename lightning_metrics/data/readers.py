"""Read human ratings and plain-text inputs, with validation that names file, row and problem.

Every reader returns rows keyed by the canonical column names (`src`, `mt`, `ref`, `score`,
`lp`, `system`, `doc_id`); a :class:`ColumnMap` says which source column feeds which name.
Decoding the file formats themselves is :mod:`lightning_metrics.data.formats`'.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Sequence

from lightning_metrics.data.formats import TABLE_SUFFIXES, load_columns, read_lines
from lightning_metrics.errors import InputError
from lightning_metrics.tables import take_rows

log = logging.getLogger(__name__)

TEXT_COLUMNS = ("src", "mt", "ref", "pos", "neg")
ON_INVALID = ("error", "skip")


@dataclass(frozen=True)
class ColumnMap:
    """Which column of the source holds each canonical field (`--mt-col hyp` sets ``mt="hyp"``)."""

    src: str = "src"
    mt: str = "mt"
    ref: str = "ref"
    score: str = "score"
    lp: str = "lp"
    system: str = "system"
    doc_id: str = "doc_id"

    @classmethod
    def from_any(cls, columns: "ColumnMap | dict | None") -> "ColumnMap":
        if columns is None:
            return cls()
        if isinstance(columns, ColumnMap):
            return columns
        unknown = set(columns) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown canonical column(s) {sorted(unknown)}; known: {[f.name for f in fields(cls)]}")
        return cls(**{k: v for k, v in columns.items() if v})

    def renames(self) -> dict[str, str]:
        """Source column name -> canonical name, for the columns that differ."""
        return {getattr(self, f.name): f.name for f in fields(self) if getattr(self, f.name) != f.name}


def read_ratings(
    source: str | os.PathLike,
    columns: ColumnMap | dict | None = None,
    required: Sequence[str] = ("mt", "ref", "score"),
    on_invalid: str = "error",
    split: str = "train",
):
    """Read a ratings table into a ``datasets.Dataset`` with canonical column names
    (:func:`read_rating_table` gives the same rows as a column table).

    ``source`` is a ``.csv``/``.tsv``/``.jsonl``/``.parquet`` file, a folder written by
    ``Dataset.save_to_disk``, or a hub dataset name. ``required`` lists canonical columns that
    must exist; text columns among them must be non-empty and the others (``score``,
    ``raw``, training targets) finite numbers. With ``on_invalid="skip"`` bad rows are dropped and
    counted in a log warning;
    with ``"error"`` (default) the first bad row raises :class:`InputError`.
    """
    import datasets

    return datasets.Dataset.from_dict(read_rating_table(source, columns, required, on_invalid, split))


def read_rating_table(
    source: str | os.PathLike,
    columns: ColumnMap | dict | None = None,
    required: Sequence[str] = ("mt", "ref", "score"),
    on_invalid: str = "error",
    split: str = "train",
) -> dict[str, list]:
    """:func:`read_ratings` as a column table ``{column: values}``: what the data modules and metrics take."""
    return check_table(source, read_table(source, columns, split, on_invalid), required, on_invalid, columns)


def read_table(
    source: str | os.PathLike, columns: ColumnMap | dict | None = None, split: str = "train", on_invalid: str = "error"
) -> dict[str, list]:
    """The columns of a table or dataset, renamed to canonical names by ``columns`` (no validation
    beyond the format's own: ``on_invalid`` applies to an MQM annotation file's markup)."""
    name = str(source)
    return rename_columns(name, load_columns(name, split, on_invalid), ColumnMap.from_any(columns).renames())


def check_table(
    source: str | os.PathLike,
    table: dict[str, list],
    required: Sequence[str],
    on_invalid: str = "error",
    columns: ColumnMap | dict | None = None,
) -> dict[str, list]:
    """Validate a :func:`read_table` result as :func:`read_ratings` describes; returns the kept rows."""
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {ON_INVALID}, got {on_invalid!r}")
    cmap = ColumnMap.from_any(columns)
    name = str(source)
    missing = [c for c in required if c not in table]
    if missing:
        flag = ", ".join(f"{getattr(cmap, c)!r} (for {c})" if getattr(cmap, c, c) != c else repr(c) for c in missing)
        raise InputError(name, f"missing required column {flag}; found columns {sorted(table)}")
    n_rows = len(next(iter(table.values())))
    if n_rows == 0:
        raise InputError(name, "empty file: no data rows")
    keep, reasons = _validate_rows(name, table, n_rows, required, on_invalid)
    if len(keep) < n_rows:
        detail = "; ".join(f"{n} {why}" for why, n in reasons.most_common())
        log.warning("%s: skipped %d of %d rows (%s)", name, n_rows - len(keep), n_rows, detail)
        if not keep:
            raise InputError(name, f"every row was invalid ({detail})")
        table = take_rows(table, keep)
    for column in {*required, "score"} & set(table):
        if column not in TEXT_COLUMNS:
            table[column] = [float(v) for v in table[column]]
    return table


def read_parallel_text(
    mt: str | os.PathLike | Sequence[str | os.PathLike],
    ref: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    src: str | os.PathLike | None = None,
    on_invalid: str = "error",
) -> dict[str, list]:
    """Read one-segment-per-line files: one or more system outputs, references and a source.

    Returns ``{"mt": [[lines of system 1], ...], "ref": [...] | None, "src": [...] | None,
    "systems": [file names]}``; with several reference files, ``ref`` holds a list per line. All
    files must have the same number of lines; an empty line is
    invalid (``on_invalid="skip"`` drops that line index from every file, keeping alignment).
    """
    mt_paths = [mt] if isinstance(mt, (str, os.PathLike)) else list(mt)
    if not mt_paths:
        raise InputError("-t", "no system output file given")
    named = [("mt", str(p)) for p in mt_paths]
    refs = [] if ref is None else [ref] if isinstance(ref, (str, os.PathLike)) else list(ref)
    named += [("ref", str(p)) for p in refs] + ([("src", str(src))] if src is not None else [])
    lines = [read_lines(path) for _, path in named]
    counts = {len(x) for x in lines}
    if len(counts) > 1:
        listing = ", ".join(f"{path} has {len(x)} lines" for (_, path), x in zip(named, lines))
        raise InputError(named[0][1], f"line counts differ: {listing}")
    n = counts.pop()
    if n == 0:
        raise InputError(named[0][1], "empty file: no lines")
    bad: dict[int, str] = {}
    for (kind, path), file_lines in zip(named, lines):
        for i, line in enumerate(file_lines):
            if not line.strip() and i not in bad:
                if on_invalid == "error":
                    raise InputError(path, f"empty {kind} text", row=i + 1)
                bad[i] = f"empty {kind} text"
    keep = [i for i in range(n) if i not in bad]
    if bad:
        log.warning(
            "skipped %d of %d lines (%s)", len(bad), n, ", ".join(f"{k}: {v}" for k, v in Counter(bad.values()).items())
        )
        if not keep:
            raise InputError(named[0][1], "every line was invalid")
    pick = lambda xs: [xs[i] for i in keep]  # noqa: E731
    n_mt = len(mt_paths)
    out = {
        "mt": [pick(x) for x in lines[:n_mt]],
        "ref": None,
        "src": None,
        "systems": [Path(p).name for p in map(str, mt_paths)],
    }
    ref_lines = [pick(x) for (kind, _), x in zip(named[n_mt:], lines[n_mt:]) if kind == "ref"]
    if ref_lines:
        out["ref"] = ref_lines[0] if len(ref_lines) == 1 else [list(r) for r in zip(*ref_lines)]
    if src is not None:
        out["src"] = pick(lines[-1])
    return out


def read_columns(source: str | os.PathLike, split: str = "train") -> dict[str, list]:
    """The raw columns of a table or dataset (no renaming, no validation beyond decoding)."""
    return load_columns(str(source), split)


def read_corpus(
    source: str | os.PathLike, column: str | None = None, split: str = "train", table: dict | None = None
) -> list[str]:
    """Sentences from a plain-text file (one per line) or from a column of a table or dataset.

    Tables (.csv/.tsv/.jsonl/.parquet, saved folders, hub names) take ``column``, by default
    ``ref`` or else ``text``; ``table`` passes columns already read. An empty line or cell is
    an error naming its row.
    """
    name = str(source)
    path = Path(name)
    if table is None and path.is_file() and path.suffix.lower() not in TABLE_SUFFIXES:
        lines = read_lines(name)
        values: list = lines
    else:
        table = load_columns(name, split) if table is None else table
        column = column or next((c for c in ("ref", "text") if c in table), None)
        if column is None or column not in table:
            raise InputError(
                name, f"no column {column or 'ref/text'!r} to read sentences from; columns are {sorted(table)}"
            )
        values = table[column]
    if not values:
        raise InputError(name, "empty file: no sentences")
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value.strip():
            raise InputError(name, "empty line" if column is None else f"empty {column} text", row=i + 1)
    return list(values)


def read_corpus_with_sources(
    corpus: str | os.PathLike, column: str | None = None, sources: str | os.PathLike | None = None, unique: bool = True
) -> tuple[list[str], list[str] | None]:
    """Sentences and, where there are any, their sources: a parallel corpus.

    Sources come from ``sources`` (a text file, one line per corpus sentence) or from a table
    corpus's ``src`` column; a plain-text corpus without ``sources`` has none (None).
    ``unique`` keeps each (sentence, source) pair of a table once: a ratings table repeats
    every reference once per rated system. Text files keep every line.
    """
    name = str(corpus)
    path = Path(name)
    text_file = path.is_file() and path.suffix.lower() not in TABLE_SUFFIXES
    if text_file:
        refs, srcs = read_corpus(name), None
    else:
        table = read_columns(name)
        refs, srcs = read_corpus(name, column=column, table=table), table.get("src")
        if srcs is not None:
            empty = next((k for k, x in enumerate(srcs) if not isinstance(x, str) or not x.strip()), None)
            if empty is not None:
                raise InputError(name, "empty src text", row=empty + 1)
    if sources is not None:
        srcs = read_corpus(sources)
        if len(srcs) != len(refs):
            raise InputError(str(sources), f"has {len(srcs)} lines but the corpus {name} has {len(refs)} sentences")
    if text_file or not unique:
        return refs, srcs
    keys = list(dict.fromkeys(zip(refs, srcs if srcs is not None else [None] * len(refs))))
    return [r for r, _ in keys], None if srcs is None else [s for _, s in keys]


# --- validation ----------------------------------------------------------------------------


def rename_columns(name: str, table: dict[str, list], renames: dict[str, str]) -> dict[str, list]:
    """``table`` with each column ``c`` of ``renames`` (file name -> canonical name) renamed; a mapped
    column that is absent, or a canonical name the file already uses, is an error naming ``name``."""
    renames = {column: field for column, field in renames.items() if column != field}
    absent = [f"{field} -> {column!r}" for column, field in renames.items() if column not in table]
    if absent:  # a mapped column that is not there must never fall back to the file's own column of that name
        raise InputError(
            name, f"mapped column(s) not found: {', '.join(absent)}; the file's columns are {sorted(table)}"
        )
    out = {}
    for col, values in table.items():
        target = renames.get(col, col)
        if target != col and target in table and target not in renames:
            raise InputError(
                name, f"column {col!r} is mapped to {target!r}, but the file already has a {target!r} column"
            )
        out[target] = values
    return out


def _validate_rows(
    name: str, table: dict[str, list], n_rows: int, required: Iterable[str], on_invalid: str
) -> tuple[list[int], Counter]:
    # required text columns must be non-empty; any other required column is a number (score, raw, targets).
    # An empty mt is a system's empty output that a person rated (WMT21's MQM has two): kept, and counted.
    checks = [(c, _text_problem if c in TEXT_COLUMNS else _score_problem) for c in required]
    keep, reasons, empty_mt = [], Counter(), 0
    for i in range(n_rows):
        problem = next((p for col, check in checks if (p := check(col, table[col][i]))), None)
        if problem == "empty mt text" and isinstance(table["mt"][i], str):
            problem, empty_mt = None, empty_mt + 1
        if problem is None:
            keep.append(i)
        elif on_invalid == "error":
            raise InputError(name, problem, row=i + 1)
        else:
            reasons[problem.split(":")[0]] += 1
    if empty_mt and empty_mt == len(keep):
        raise InputError(name, "every mt text is empty: is the mt column the right one?")
    if empty_mt:
        log.warning("%s: %d row(s) have an empty mt, kept as empty translations (rated by a person)", name, empty_mt)
    return keep, reasons


def _text_problem(col: str, value) -> str | None:
    if value is None or not isinstance(value, str) or not value.strip():
        return f"empty {col} text"
    return None


def _score_problem(col: str, value) -> str | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return f"{col} is not a number: {value!r}"
    if not math.isfinite(number):
        return f"{col} is not a finite number: {value!r}"
    return None
