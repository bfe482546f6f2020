"""File formats decoded into raw columns ``{column: values}``, before any renaming or validation:
CSV and TSV (numbers inferred per column), JSON lines, Parquet, a folder written by
``Dataset.save_to_disk``, a hub dataset name, and plain text read as lines. Undecodable input is
one :class:`~lightning_metrics.errors.InputError` naming the file."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

from lightning_metrics.data.mqm import is_mqm_header, read_mqm
from lightning_metrics.errors import InputError

TABULAR = {".csv": ",", ".tsv": "\t"}
STRING_COLUMNS = ("src", "mt", "ref", "lp", "system", "doc_id")  # kept as text, never read as numbers
TABLE_SUFFIXES = (*TABULAR, ".jsonl", ".parquet")


def load_columns(name: str, split: str, on_invalid: str = "error") -> dict[str, list]:
    """The raw columns of ``name``; an MQM annotation TSV (:mod:`~lightning_metrics.data.mqm`, which owns
    that format) comes back as one row per segment and system, its invalid rows skipped under
    ``on_invalid="skip"``."""
    path = Path(name)
    if path.is_dir():
        return _load_saved_dataset(name, split)
    suffix = path.suffix.lower()
    if path.exists() or suffix in TABLE_SUFFIXES:
        if not path.exists():
            raise InputError(name, "file not found")
        if suffix in TABULAR:
            text = _read_text(name)
            if suffix == ".tsv" and is_mqm_header(text.partition("\n")[0].rstrip("\r").split("\t")):
                return read_mqm(name, text, on_invalid).columns
            return _load_tabular(name, text, TABULAR[suffix])
        if suffix == ".jsonl":
            return _load_jsonl(name, _read_text(name))
        if suffix == ".parquet":
            return _load_parquet(name)
        raise InputError(
            name, f"unsupported file type {suffix!r}; use .csv, .tsv, .jsonl, .parquet or a dataset folder"
        )
    return _load_hub_dataset(name, split)


def _read_text(name: str, allow_empty: bool = False) -> str:
    """The file decoded as UTF-8; undecodable bytes are an error naming the row (a table's
    record, else the line)."""
    try:
        data = Path(name).read_bytes()
    except OSError as e:
        raise InputError(name, f"cannot read file: {e.strerror or e}") from None
    if not allow_empty and not data.strip():
        raise InputError(name, "empty file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        prefix = data[: e.start].decode("utf-8-sig")
        line = prefix.count("\n") + 1
        row = line
        if Path(name).suffix.lower() in TABULAR:  # count records, not lines: fields may hold newlines
            try:
                records = list(csv.reader(io.StringIO(prefix)))
                row = len(records) - (0 if prefix.endswith("\n") else 1)
            except csv.Error:  # the text before the bad bytes is no CSV either (NUL bytes, a huge field): say the line
                pass
        raise InputError(
            name, f"undecodable bytes (not UTF-8) at byte {e.start}, line {line}", row=max(row, 1)
        ) from None


def _load_tabular(name: str, text: str, delimiter: str) -> dict[str, list]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
        rows = []
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise InputError(name, f"has {len(row)} fields but the header has {len(header)}", row=len(rows) + 1)
            rows.append(row)
    except csv.Error as e:
        raise InputError(name, f"malformed {'TSV' if delimiter == chr(9) else 'CSV'}: {e}", row=len(rows) + 1) from None
    dupes = [h for h, c in Counter(header).items() if c > 1]
    if dupes:
        raise InputError(name, f"duplicate column name(s) {dupes} in the header")
    table = {h: [r[j] for r in rows] for j, h in enumerate(header)}
    return {h: v if h in STRING_COLUMNS else _infer_numbers(v) for h, v in table.items()}


def _infer_numbers(values: list[str]) -> list:
    """Turn a column of strings into ints or floats when every non-empty value parses."""
    for cast in (int, float):
        try:
            return [cast(v) if v.strip() else None for v in values]
        except ValueError:
            continue
    return values


def _load_jsonl(name: str, text: str) -> dict[str, list]:
    records: list[tuple[int, dict]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(name, f"invalid JSON: {e.msg} at column {e.colno}", row=lineno) from None
        if not isinstance(obj, dict):
            raise InputError(name, f"expected a JSON object, got {type(obj).__name__}", row=lineno)
        records.append((lineno, obj))
    keys = list(dict.fromkeys(k for _, obj in records for k in obj))
    return {k: [obj.get(k) for _, obj in records] for k in keys}


def _load_parquet(name: str) -> dict[str, list]:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(name).to_pydict()
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise InputError(name, f"not a readable Parquet file ({type(e).__name__}: {str(e).splitlines()[0]})") from None


def _load_saved_dataset(name: str, split: str) -> dict[str, list]:
    import datasets

    try:
        ds = datasets.load_from_disk(name)
    except Exception as e:
        raise InputError(name, f"folder is not a dataset saved with save_to_disk ({str(e).splitlines()[0]})") from None
    return _dataset_columns(name, ds, split)


def _load_hub_dataset(name: str, split: str) -> dict[str, list]:
    import datasets

    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise InputError(name, f"not a local file or folder, and not loadable as a hub dataset ({first})") from None
    return _dataset_columns(name, ds, split)


def _dataset_columns(name: str, ds, split: str) -> dict[str, list]:
    import datasets

    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise InputError(name, f"no split {split!r}; splits are {sorted(ds)}")
        ds = ds[split]
    return ds.to_dict()


def read_lines(path: str) -> list[str]:
    text = _read_text(path, allow_empty=True)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]
