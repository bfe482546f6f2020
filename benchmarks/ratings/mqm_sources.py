"""MQM with error spans: newstest2020 (en-de, zh-en), newstest2021 (en-de, zh-en, en-ru) and the WMT21
TED talks (en-de, zh-en, en-ru), from the full rater files of WMT-QE 2022's word-level training data
(TED en-de and zh-en from google/wmt-mqm-human-evaluation's, which the snapshot holds).

The rater files are read by the project's MQM reader (scores, spans, one row per segment and system).
What each source adds and checks:

- **references**: newstest2020 takes the text of ``Human-A.0`` (rated beside the systems, so it is in
  the file); newstest2021 the release's reference file (en-de ``ref.C``, zh-en and en-ru ``ref.A``, the
  references the WMT21 metrics task used) at the line where the segment's document lies; TED the
  ``ref``/``ref.A`` rows of the file. Human translations are not kept as systems.
- **document boundaries**: a newstest2020 document's segments are consecutive (global id minus
  position is one number per document); a newstest2021 document is found in the release's source
  file by text, every segment of it at its position, once and only once. Where a 2021 file also rates
  the reference, its text must equal the reference file's line.
- **scores**: Google's weighting (the reader's), with 10 for the critical errors only the en-ru files
  have; finite and at most 0; where google/wmt-mqm-human-evaluation has the set's ``avg_seg_scores``,
  the share of rows equal to it is reported.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

from built import Built, is_human, stripped
from snapshot import Snapshot

from lightning_metrics.data.mqm import read_mqm

QE_REPO, GOOGLE_REPO, WMT21_REPO = (
    "WMT-QE-Task/wmt-qe-2022-data",
    "google/wmt-mqm-human-evaluation",
    "wmt-conference/wmt21-news-systems",
)
_MARKUP = re.compile(r"</?v>")
_NOT_WORD = re.compile(r"[\W_]+")
TARBALL = "train-dev_data/task1_word-level/train/{pair}_mqm/{pair}-train-{part}.tar.gz"
WEIGHTING = "google+critical"  # Google's MQM weights; critical errors (only the en-ru files have them) 10
REFERENCE_2020 = "Human-A.0"
CSV_QUOTED = ("en-ru",)
CATEGORY_SPELLINGS = {
    "Non_translation": "Non-translation!"
}  # WMT-QE's 2021 zh-en copy spells it so  # WMT-QE 2022's en-ru rater files quote their fields as CSV does
REFERENCES_2021 = {"en-de": "C", "zh-en": "A", "en-ru": "A"}
TED_REFERENCES = ("ref", "ref.A")
GOOGLE_TED = {"en-de": "ted/ende/mqm_ted_ende.tsv", "zh-en": "ted/zhen/mqm_ted_zhen.tsv"}
REPAIRED = "annotation rows whose text differs from the segment's (error kept, span not)"
GOOGLE_AVERAGES = {
    ("2020", "en-de"): "newstest2020/ende/mqm_newstest2020_ende.avg_seg_scores.tsv",
    ("2020", "zh-en"): "newstest2020/zhen/mqm_newstest2020_zhen.avg_seg_scores.tsv",
    ("2021", "en-de"): "newstest2021/ende/mqm_newstest2021_ende.avg_seg_scores.tsv",
    ("2021", "zh-en"): "newstest2021/zhen/mqm_newstest2021_zhen.avg_seg_scores.tsv",
    ("ted", "en-de"): "ted/ende/mqm_ted_ende.avg_seg_scores.tsv",
    ("ted", "zh-en"): "ted/zhen/mqm_ted_zhen.avg_seg_scores.tsv",
}


def rater_rows(qe: Snapshot, pair: str, part: str, built: Built) -> list[dict] | None:
    """One row per (segment, system) of a WMT-QE 2022 MQM tarball; None (and the pair left out) when absent."""
    path = TARBALL.format(pair=pair, part=part)
    if not qe.has(path):
        built.left_out.append(f"{pair}: {qe.name}:{path} is not in the snapshot")
        return None
    built.reads(qe, path)
    members = {name: data for name, data in qe.tar_members(path).items() if name.endswith(".tsv")}
    if len(members) != 1:
        built.left_out.append(f"{pair}: {path} holds {len(members)} .tsv files, not one")
        return None
    ((member, data),) = members.items()
    text, repaired = repaired_tsv(data.decode("utf-8"), csv_quoted=pair in CSV_QUOTED)
    built.checks.setdefault(REPAIRED, {})[pair] = repaired
    table = read_mqm(f"{qe.name}:{path}:{Path(member).name}", text, weighting=WEIGHTING)
    columns = table.columns
    return [{key: columns[key][i] for key in columns} for i in range(len(columns["mt"]))]


def repaired_tsv(text: str, csv_quoted: bool = False) -> tuple[str, int]:
    """The rater file with each annotation row's target and source set to its segment's text (the most
    common among the segment's rows once the ``<v>`` tags are removed) where the row's own differs or
    its markup is broken: such a row's error still counts in the score, its span does not. Some rows of
    the 2020 files repeat the segment's text, or cut it, inside the target. ``csv_quoted``: the fields
    are quoted as CSV quotes them (``"a ""quoted"" word"``), as in the en-ru files. Categories a copy
    spells its own way get Google's spelling (:data:`CATEGORY_SPELLINGS`), which the weights key on."""
    quoting = csv.QUOTE_MINIMAL if csv_quoted else csv.QUOTE_NONE
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=quoting)
    header, *records = [r for r in reader if r]
    at = {name: header.index(name) for name in ("system", "doc", "seg_id", "source", "target", "category")}
    position = header.index("doc_id")
    groups = defaultdict(list)
    for record in records:
        record[at["category"]] = CATEGORY_SPELLINGS.get(record[at["category"]], record[at["category"]])
        groups[(record[at["system"]], record[at["doc"]], record[position], record[at["seg_id"]])].append(record)
    repaired = 0
    for rows in groups.values():
        for column in (at["target"], at["source"]):
            plain = [_MARKUP.sub("", r[column]).strip() for r in rows]
            segment_text = Counter(plain).most_common(1)[0][0]
            for record, own in zip(rows, plain):
                if own != segment_text or not _well_formed(record[column]):
                    record[column] = segment_text
                    repaired += 1
    return "".join("\t".join(record) + "\n" for record in [header, *records]), repaired


def _well_formed(text: str) -> bool:
    """Whether every ``<v>`` closes, in order, before the next opens."""
    tags = _MARKUP.findall(text)
    return all(tag == ("<v>" if i % 2 == 0 else "</v>") for i, tag in enumerate(tags)) and len(tags) % 2 == 0


def mqm_row(row: dict, pair: str, ref: str, seg_id, year: int, domain: str) -> dict:
    return {
        "lp": pair, "src": row["src"], "mt": row["mt"], "ref": ref, "score": row["score"],
        "system": system_name(row["system"]),
        "doc_id": row["doc_id"], "seg_id": seg_id, "year": year, "domain": domain,
        "raters": row["raters"], "spans": row["spans"],
    }  # fmt: skip


def score_in_range(row: dict, built: Built) -> bool:
    if math.isfinite(row["score"]) and row["score"] <= 0:
        return True
    built.drop("MQM score not finite or above 0")
    return False


def newstest2020_segments(qe: Snapshot, built: Built) -> dict[str, list[dict]]:
    """newstest2020's rows per pair, every human translation included, each with ``ref`` (Human-A.0's
    text) where the segment has one; documents whose segments are not consecutive are dropped."""
    out = {}
    for pair in ("en-de", "zh-en"):
        rows = rater_rows(qe, pair, "2020", built)
        if rows is None:
            continue
        offsets = defaultdict(set)
        for row in rows:
            offsets[row["doc_id"]].add(int(row["seg_id"]) - int(row["doc_seg_id"]))
        broken = {doc for doc, values in offsets.items() if len(values) > 1}
        built.drop("newstest2020 document whose segments are not consecutive", sum(r["doc_id"] in broken for r in rows))
        rows = [r for r in rows if r["doc_id"] not in broken]
        refs = {r["seg_id"]: r for r in rows if r["system"] == REFERENCE_2020}
        for row in rows:
            ref = refs.get(row["seg_id"])
            row["ref"] = ref["mt"] if ref is not None and ref["src"] == row["src"] else None
            row["ref_problem"] = None if ref is not None else "no reference (Human-A.0 not rated on the segment)"
            if ref is not None and ref["src"] != row["src"]:
                row["ref_problem"] = "source differs from the reference row's"
        out[pair] = rows
        built.checks.setdefault("documents", {})[f"2020 {pair}"] = len(offsets) - len(broken)
    return out


def newstest2020(qe: Snapshot, google: Snapshot | None) -> tuple[Built, dict[str, list[dict]]]:
    """The newstest2020 source, and every rated segment per pair (humans' too) for the WMT20 DA join."""
    built = Built("mqm_newstest2020", "mqm", "jsonl")
    segments = newstest2020_segments(qe, built)
    for pair, rows in segments.items():
        kept = []
        for row in rows:
            if is_human(row["system"]):
                continue
            if row["ref_problem"]:
                built.drop(row["ref_problem"])
            elif score_in_range(row, built):
                kept.append(mqm_row(row, pair, row["ref"], int(row["seg_id"]), 2020, "news"))
        built.rows += kept
        compare_with_google(google, ("2020", pair), kept, built)
    return built, segments


def newstest2021(qe: Snapshot, wmt21: Snapshot | None, google: Snapshot | None) -> Built:
    built = Built("mqm_newstest2021", "mqm", "jsonl")
    for pair, letter in REFERENCES_2021.items():
        rows = rater_rows(qe, pair, "2021-news", built)
        if rows is None:
            continue
        source, target = pair.split("-")
        src_path = f"txt/sources/newstest2021.{pair}.src.{source}"
        ref_path = f"txt/references/newstest2021.{pair}.ref.{letter}.{target}"
        if wmt21 is None or not (wmt21.has(src_path) and wmt21.has(ref_path)):
            built.left_out.append(f"{pair}: {WMT21_REPO}:{ref_path} is not there (no reference)")
            continue
        built.reads(wmt21, src_path), built.reads(wmt21, ref_path)
        src_lines, ref_lines = wmt21.lines(src_path), wmt21.lines(ref_path)
        starts = locate_documents(rows, src_lines, built)
        line_of = lambda r: starts[r["doc_id"]] + int(r["doc_seg_id"]) - 1  # noqa: E731
        rated_refs = {line_of(r): r["mt"] for r in rows if r["system"] == f"ref.{letter}" and r["doc_id"] in starts}
        differs = {line for line, text in rated_refs.items() if comparable(ref_lines[line]) != comparable(text)}
        built.checks.setdefault("rated reference equal to the reference file", {})[pair] = (
            f"{len(rated_refs) - len(differs)} of {len(rated_refs)}"
        )
        kept = []
        for row in rows:
            if is_human(row["system"]) or row["doc_id"] not in starts:
                continue
            line = line_of(row)
            if line in differs:
                built.drop("rated reference differs from the reference file")
            elif score_in_range(row, built):
                ref = rated_refs.get(line, stripped(ref_lines[line]))
                kept.append(mqm_row(row, pair, ref, line + 1, 2021, "news"))
        built.rows += kept
        compare_with_google(google, ("2021", pair), kept, built)
    return built


def ted2021(qe: Snapshot, google: Snapshot | None) -> Built:
    built = Built("mqm_ted2021", "mqm", "jsonl")
    for pair in ("en-de", "zh-en", "en-ru"):
        rows = ted_rows(qe, google, pair, built)
        if rows is None:
            continue
        key = lambda r: (r["doc_id"], r["doc_seg_id"])  # noqa: E731
        refs = {key(r): r for r in rows if r["system"] in TED_REFERENCES}
        kept = []
        for row in rows:
            if is_human(row["system"]):
                continue
            ref = refs.get(key(row))
            if ref is None:
                built.drop("no reference (the file's ref row is missing for the segment)")
            elif ref["src"] != row["src"]:
                built.drop("source differs from the reference row's")
            elif score_in_range(row, built):
                kept.append(mqm_row(row, pair, ref["mt"], row["seg_id"], 2021, "ted"))
        built.rows += kept
        compare_with_google(google, ("ted", pair), kept, built)
    return built


def ted_rows(qe: Snapshot, google: Snapshot | None, pair: str, built: Built) -> list[dict] | None:
    """A TED pair's rows from google/wmt-mqm-human-evaluation's rater file where the snapshot has it (the
    WMT-QE copy numbers segments its own way), else from WMT-QE 2022's (en-ru is only there)."""
    path = GOOGLE_TED.get(pair)
    if google is None or path is None or not google.has(path):
        return rater_rows(qe, pair, "2021-ted", built)
    built.reads(google, path)
    text, repaired = repaired_tsv(google.text(path))
    built.checks.setdefault(REPAIRED, {})[pair] = repaired
    columns = read_mqm(f"{google.name}:{path}", text, weighting=WEIGHTING).columns
    return [{key: columns[key][i] for key in columns} for i in range(len(columns["mt"]))]


def locate_documents(rows: list[dict], lines: list[str], built: Built) -> dict[str, int]:
    """Each document's first line (0-based) in the test set's source file: the one place where every
    rated segment of it has its source text at its position (compared by :func:`comparable`). Rows of
    a document found nowhere, or at more than one place, are dropped (counted by reason)."""
    by_text = defaultdict(list)
    for i, line in enumerate(lines):
        by_text[comparable(line)].append(i)
    documents = defaultdict(dict)
    for row in rows:
        documents[row["doc_id"]][int(row["doc_seg_id"])] = comparable(row["src"])
    starts, problems = {}, Counter()
    for doc, texts in documents.items():
        first = min(texts)
        candidates = {i - (first - 1) for i in by_text.get(texts[first], [])}
        fits = [
            s for s in candidates
            if all(0 <= s + p - 1 < len(lines) and comparable(lines[s + p - 1]) == t for p, t in texts.items())
        ]  # fmt: skip
        if len(fits) == 1:
            starts[doc] = fits[0]
        else:
            problems[doc] = "document not found in the test set" if not fits else "document found at several places"
    for row in rows:
        if row["doc_id"] in problems and not is_human(row["system"]):
            built.drop(problems[row["doc_id"]])
    built.checks.setdefault("documents located in the test set", {})[rows[0]["lp"]] = (
        f"{len(starts)} of {len(documents)}"
    )
    return starts


def comparable(text: str) -> str:
    """A text as the joins compare it: its letters and digits, lower-cased. The rater files drop the
    spaces the release has between Chinese phrases, straighten its quotes, and write "6000" and "UN"
    where the release has "6,000" and "U.N."."""
    return _NOT_WORD.sub("", text).lower()


def system_name(system: str) -> str:
    """The system as the WMT21 release names it (the rater files of 2021 prefix ``hyp.``)."""
    return system.removeprefix("hyp.")


def compare_with_google(google: Snapshot | None, which: tuple[str, str], rows: list[dict], built: Built) -> None:
    """Reports how many kept rows equal google/wmt-mqm-human-evaluation's average segment scores, by
    system and segment id (the output rows' ``seg_id``: the test set's line where a rater file numbers
    segments its own way)."""
    path = GOOGLE_AVERAGES.get(which)
    if google is None or path is None or not google.has(path):
        return
    built.reads(google, path)
    theirs = {}
    for line in google.lines(path)[1:]:
        fields = line.split()
        if len(fields) != 3:
            continue
        system, score, seg = fields
        if score not in ("None", "nan"):
            theirs[(system, seg)] = float(score)
    mine = {(r["system"], str(r["seg_id"])): r["score"] for r in rows}
    shared = [k for k in mine if k in theirs]
    equal = sum(abs(mine[k] - theirs[k]) < 1e-4 for k in shared)
    built.checks.setdefault("equal to Google's avg_seg_scores", {})[" ".join(which)] = f"{equal} of {len(shared)}"
