"""MQM error annotations (google/wmt-mqm-human-evaluation TSVs): one owner for the format.

A file has one row per error per rater: ``system, doc, doc_id|docSegId, seg_id|globalSegId, rater,
source, target, category, severity[, comment|metadata]``. ``<v>…</v>`` marks the error's span in the
target (or, for a source-side error, in the source); a rater who found nothing leaves one
``No-error`` row. :func:`read_mqm` turns the rows into one row per (segment, system):

- ``src``, ``mt`` (the texts without markup and without surrounding whitespace, where raters' copies
  of a segment may differ), ``lp`` (from the file name, ``_ende`` -> ``en-de``),
  ``system``, ``doc_id`` (the document), ``seg_id`` (the segment in the test set; ``doc:position``
  where the file gives none), ``doc_seg_id`` (its position in the document), ``raters`` (how many rated it);
- ``score``: the segment's MQM score by Google's weighting (mt-metrics-eval's ``score_mqm.py``, Freitag
  et al. 2021): each error weighs as the most specific of ``Major`` 5, ``Minor`` 1, ``Neutral`` 0,
  ``Major/Non-translation!`` 25 and ``Minor/Fluency/Punctuation`` 0.1 that matches its severity and
  category, anything else 0 (Google's scheme has no critical errors; ``weighting="google+critical"``
  gives them 10); summed per rater, negated and averaged over every rater of the segment, those whose
  only rows are attention checks included (the repository's ``avg_seg_scores``);
- ``spans``: the mt's error spans merged over raters, ``{start, end, severity}`` with character offsets
  into ``mt`` (end exclusive): a character is in error if any rater marked it, at the highest
  severity any rater gave it; ``rater_spans`` keeps every rater's spans (``rater``, ``start``, ``end``,
  ``severity``, ``category``);
- ``source_spans``: source-side errors, kept apart (offsets into ``src``).

Rows the format marks as not annotations (``HOTW-test``, the attention checks of side-by-side
files) give no error and no span, but their rater counts (counted in :attr:`MqmTable.skipped` and
logged). A zero-length span (an omission, marked between two characters) is kept as a span with
``start == end``: it covers no character, and the WMT23 span F1 counts it as one. Bad markup
is one :class:`InputError` naming the file and the row (1-based, after the header): an unclosed or
stray ``<v>``, a target whose text differs from the segment's once the tags are removed, an unknown
severity.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lightning_metrics.errors import InputError
from lightning_metrics.spans import SEVERITIES, SEVERITY_WEIGHTS, character_levels, runs

log = logging.getLogger(__name__)

KNOWN_SEVERITIES = (*SEVERITY_WEIGHTS, "neutral", "no-error")
GOOGLE = {"major": 5.0, "minor": 1.0, "neutral": 0.0, "major/non-translation!": 25.0, "minor/fluency/punctuation": 0.1}
WEIGHTINGS = {"google": GOOGLE, "google+critical": {**GOOGLE, "critical": SEVERITY_WEIGHTS["critical"]}}
NOT_ANNOTATIONS = ("hotw-test",)  # side-by-side files' attention checks
REQUIRED = ("system", "doc", "rater", "source", "target", "category", "severity")
SEGMENT_COLUMNS = ("seg_id", "globalSegId")
OPEN = "<v>"
_MARK = re.compile(r"</?v>")
_LP = re.compile(r"_([a-z]{2})([a-z]{2})(?:[._]|$)")


@dataclass
class MqmTable:
    """The rows of one file (``columns``) and the counts of what was skipped, by reason."""

    columns: dict[str, list]
    skipped: Counter = field(default_factory=Counter)


def is_mqm_header(header: list[str]) -> bool:
    """Whether a TSV header is the MQM annotation format's."""
    return all(c in header for c in ("rater", "target", "severity", "category"))


def strip_markup(text: str, where: str, row: int) -> tuple[str, list[tuple[int, int]]]:
    """``text`` without ``<v>``/``</v>``, and the marked spans as ``(start, end)`` offsets into it."""
    plain, spans, start, position = [], [], None, 0
    for match in _MARK.finditer(text):
        plain.append(text[position : match.start()])
        offset = sum(map(len, plain))
        if match.group() == OPEN:
            if start is not None:
                raise InputError(where, "a <v> opens inside another <v>", row=row)
            start = offset
        else:
            if start is None:
                raise InputError(where, "a </v> closes no <v>", row=row)
            spans.append((start, offset))
            start = None
        position = match.end()
    if start is not None:
        raise InputError(where, "unclosed <v>", row=row)
    plain.append(text[position:])
    return "".join(plain), spans


def error_weight(severity: str, category: str, weighting: str = "google") -> float:
    """One error's MQM weight: the most specific entry of the weighting matching ``severity/category``
    (``score_mqm.py``'s ``Score``), 0 when none does."""
    weights = WEIGHTINGS[weighting]
    items = [severity.lower(), *category.lower().split("/")]
    while items:
        if "/".join(items) in weights:
            return weights["/".join(items)]
        items = items[:-1]
    return 0.0


def language_pair(path: str) -> str | None:
    """``en-de`` from a name like ``mqm_ted_ende.tsv``; None when the name does not say."""
    match = _LP.search(Path(path).name.lower())
    return f"{match.group(1)}-{match.group(2)}" if match else None


def read_mqm(path: str, text: str | None = None, on_invalid: str = "error", weighting: str = "google") -> MqmTable:
    """One row per (segment, system) of an MQM annotation TSV (see the module docstring).
    ``on_invalid="skip"`` skips a row with bad markup or an unknown severity instead of raising; the
    skipped rows are counted, and the first ones named, in a log warning. ``weighting``: ``google`` or
    ``google+critical`` (:data:`WEIGHTINGS`)."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {sorted(WEIGHTINGS)}, got {weighting!r}")
    header, records = _records(path, _file_text(path) if text is None else text)
    segments: dict[tuple, dict] = {}
    checks: dict[tuple, set] = {}  # the raters of attention checks, counted in their segment's average
    skipped: Counter = Counter()
    bad: list[str] = []
    for row, values in records:
        record = dict(zip(header, values))
        severity = record["severity"].strip().lower()
        if severity in NOT_ANNOTATIONS:
            skipped[f"{record['severity']} rows"] += 1
            checks.setdefault(_segment_key(record), set()).add(record["rater"])
            continue
        try:
            if severity not in KNOWN_SEVERITIES:
                known = ", ".join(s.capitalize() for s in KNOWN_SEVERITIES)
                raise InputError(path, f"unknown severity {record['severity']!r} (known: {known})", row=row)
            _add_annotation(segments, record, severity, path, row, skipped, weighting)
        except InputError as e:
            if on_invalid != "skip":
                raise
            skipped["invalid rows"] += 1
            bad.append(f"row {row}: {e.problem}")
    if skipped:
        detail = "; ".join(f"{n} {why}" for why, n in skipped.most_common())
        log.warning("%s: skipped %s%s", path, detail, f" ({'; '.join(bad[:3])})" if bad else "")
    if not segments:
        raise InputError(path, "no annotated segment")
    for key, raters in checks.items():
        if key in segments:
            for rater in raters:
                segments[key]["weights"].setdefault(rater, 0.0)
    return MqmTable(_columns(list(segments.values()), language_pair(path)), skipped)


def _file_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read the file ({e})") from None


def _records(path: str, text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the ``(row, fields)`` records; quotes are text in this format."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(reader, [])
    missing = [c for c in REQUIRED if c not in header]
    if missing or not any(c in header for c in SEGMENT_COLUMNS):
        need = [*missing] + ([] if any(c in header for c in SEGMENT_COLUMNS) else ["seg_id"])
        raise InputError(path, f"not an MQM annotation file: no column(s) {need} in the header")
    width = max(header.index(c) for c in REQUIRED) + 1
    records = []
    for row, values in enumerate(reader, start=1):
        if not values:
            continue
        if len(values) < width:
            raise InputError(path, f"has {len(values)} fields; the MQM columns need {width}", row=row)
        records.append((row, values))
    return header, records


def _segment_key(record: dict) -> tuple:
    seg, position = _segment_ids(record)
    return record["system"], record["doc"], position, seg


def _add_annotation(
    segments: dict, record: dict, severity: str, path: str, row: int, skipped: Counter, weighting: str
) -> None:
    """Adds one annotation row to its (segment, system) entry, checking its markup."""
    key = _segment_key(record)
    seg, position = key[3], key[2]
    mt, mt_spans = _trimmed(*strip_markup(record["target"], path, row))
    src, src_spans = _trimmed(*strip_markup(record["source"], path, row))
    entry = segments.get(key)
    if entry is None:
        doc = record["doc"]
        entry = segments[key] = {"system": record["system"], "seg_id": seg, "doc_id": doc, "src": src, "mt": mt}
        entry["doc_seg_id"] = position
        entry.update(weights={}, rater_spans={}, source_spans=[])
    elif mt != entry["mt"]:
        raise InputError(path, f"the target without its <v> tags differs from the segment's text ({key})", row=row)
    elif src != entry["src"]:
        raise InputError(path, f"the source without its <v> tags differs from the segment's source ({key})", row=row)
    rater = record["rater"]
    entry["weights"].setdefault(rater, 0.0)
    spans = entry["rater_spans"].setdefault(rater, [])
    if severity == "no-error":
        return
    entry["weights"][rater] += error_weight(severity, record["category"], weighting)
    if severity == "neutral":
        return
    for start, end in mt_spans:  # a zero-length span is an omission, marked between two characters
        spans.append({"start": start, "end": end, "severity": severity, "category": record["category"]})
    for start, end in src_spans:
        entry["source_spans"].append({"start": start, "end": end, "severity": severity, "rater": rater})


def _segment_ids(record: dict) -> tuple[str, str]:
    """The segment's id in the test set and its position in its document. Files without global ids
    (``-1``, as in the en-ru files of WMT-QE 2022) name a segment by document and position."""
    position = str(record.get("doc_id", record.get("docSegId", "")))
    seg = str(record.get("seg_id", record.get("globalSegId")))
    if seg.strip() in ("", "-1"):
        seg = f"{record['doc']}:{position}"
    return seg, position


def _trimmed(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """``text`` without surrounding whitespace (raters' copies differ there), the spans moved and clipped to it."""
    shift, kept = len(text) - len(text.lstrip()), text.strip()
    clip = lambda i: min(max(i - shift, 0), len(kept))  # noqa: E731
    return kept, [(clip(a), clip(b)) for a, b in spans]


def merge_spans(spans_per_rater: list[list[dict]], length: int) -> list[dict]:
    """Spans over raters merged: each character at the highest severity any rater gave it (end exclusive);
    then the omissions (zero-length spans), one per position at the highest severity marked there."""
    every = [s for spans in spans_per_rater for s in spans]
    level = character_levels(every, length).tolist()
    merged = [{"start": i, "end": j, "severity": SEVERITIES[v - 1]} for i, j, v in runs(level) if v]
    omissions: dict[int, int] = {}
    for s in every:
        if s["start"] == s["end"]:
            omissions[s["start"]] = max(omissions.get(s["start"], 0), SEVERITIES.index(s["severity"]))
    return merged + [{"start": p, "end": p, "severity": SEVERITIES[v]} for p, v in sorted(omissions.items())]


def _columns(entries: list[dict], lp: str | None) -> dict[str, list]:
    columns: dict[str, list] = {
        k: [] for k in ("src", "mt", "score", "system", "doc_id", "seg_id", "doc_seg_id", "raters")
    }
    columns.update(spans=[], rater_spans=[], source_spans=[])
    for e in entries:
        weights = e["weights"]
        columns["score"].append(-sum(weights.values()) / len(weights))
        columns["raters"].append(len(weights))
        columns["spans"].append(merge_spans(list(e["rater_spans"].values()), len(e["mt"])))
        columns["rater_spans"].append([{"rater": r, **span} for r, spans in e["rater_spans"].items() for span in spans])
        for key in ("src", "mt", "system", "doc_id", "seg_id", "doc_seg_id", "source_spans"):
            columns[key].append(e[key])
    if lp is not None:
        columns["lp"] = [lp] * len(entries)
    return columns
