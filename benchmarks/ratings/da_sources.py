"""Direct assessment with references: WMT21 into English, WMT20 en-de and zh-en, WMT17 into English.

- **WMT21** (wmt-conference/wmt21-news-systems): the DA segment ids number segments with the documents
  sorted by id, so each id is mapped to its line through the release's XML (documents in file order);
  the mapping is checked against the annotation runs of the HIT file (every run is one whole document
  in the sorted order). A pair without its XML or its HIT file in the snapshot is left out, and said.
- **WMT20** (WMT-Metrics-task/wmt20-metrics): the scores name segments ``doc::position``; their texts
  come from the newstest2020 MQM rater files (same test set, same systems), so only the systems MQM
  rated have rows. Each row's line id must agree with the release's line-to-document table.
- **WMT17** (AIPHES/ACL20-Reference-Free-MT-Evaluation's copy of the WMT17 metrics data): segment ids
  are line numbers of newstest2017; there are no documents (``doc_id`` is empty: split and resample by
  source). That copy's outputs and references are lower-cased and tokenised (its sources are not);
  the manifest counts them.

Every pair reports the Spearman correlation of sentence chrF with its scores: a misaligned join shows
as a correlation near 0 (aligned WMT DA gives 0.2-0.3).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

import numpy as np
from built import Built, is_human, stripped
from scipy.stats import spearmanr
from snapshot import Snapshot

WMT21_PAIRS = ("cs-en", "de-en", "ha-en", "is-en", "ja-en", "ru-en", "zh-en")
WMT21_SYSTEM_FILES = {"Nemo": "NVIDIA-NeMo"}  # the DA name where the release's file has another
WMT20_PAIRS = ("en-de", "zh-en")
WMT17_PAIRS = ("cs-en", "de-en", "fi-en", "lv-en", "ru-en", "tr-en", "zh-en")
_DOC = re.compile(r'<doc\b([^>]*\bid="([^"]+)"[^>]*)>(.*?)</doc>', re.S)
_SRC = re.compile(r"<src\b[^>]*>(.*?)</src>", re.S)


def da_row(pair, src, mt, ref, z, system, doc, seg, year, raw, annotators) -> dict:
    return {
        "lp": pair, "src": stripped(src), "mt": stripped(mt), "ref": stripped(ref), "score": z, "system": system,
        "doc_id": doc, "seg_id": seg, "year": year, "domain": "news", "raw": raw, "annotators": annotators,
    }  # fmt: skip


def scores_in_range(raw: float, z: float, built: Built) -> bool:
    if 0 <= raw <= 100 and math.isfinite(z):
        return True
    built.drop("raw score outside 0-100 or z not finite")
    return False


def chrf_check(built: Built, rows: list[dict]) -> None:
    from sacrebleu.metrics import CHRF

    if len(rows) < 3:
        return
    chrf = CHRF()
    values = [chrf.sentence_score(r["mt"], [r["ref"]]).score for r in rows]
    rho = spearmanr(values, [r["score"] for r in rows]).statistic
    built.checks.setdefault("Spearman of sentence chrF with the scores", {})[rows[0]["lp"]] = round(float(rho), 3)


def sorted_document_lines(xml: str) -> tuple[list[int], list[int], list[tuple[str, int]]]:
    """From a WMT21 XML: each DA segment id's 0-based line (ids number segments with the documents
    sorted by id, from 1), the first sorted id of each document, and the documents in file order. Test
    suites' documents are not part of the test set (nor of ``txt/``)."""
    documents = [
        (m.group(2), len(re.findall(r"<seg\b", _SRC.search(m.group(3)).group(1))))
        for m in _DOC.finditer(xml)
        if "testsuite=" not in m.group(1)
    ]
    first_line = np.cumsum([0] + [n for _, n in documents])[:-1]
    lines, starts = [], []
    for index in sorted(range(len(documents)), key=lambda i: documents[i][0]):
        starts.append(len(lines) + 1)
        lines.extend(range(first_line[index], first_line[index] + documents[index][1]))
    return lines, starts, documents


def runs_on_boundaries(hits: list[str], starts: list[int], total: int) -> tuple[int, int]:
    """How many annotation runs (one HIT, worker, system and run id) of a WMT21 HIT file cover exactly
    one document in the sorted order, of how many."""
    header, *records = [line.split() for line in hits if line.strip()]
    at = {name: header.index(name) for name in ("HITId", "WorkerId", "sys_id", "rid", "sid")}
    runs = defaultdict(set)
    for r in records:
        runs[(r[at["HITId"]], r[at["WorkerId"]], r[at["sys_id"]], r[at["rid"]])].add(int(r[at["sid"]]))
    end_of = {a: b - 1 for a, b in zip(starts, [*starts[1:], total + 1])}
    whole = sum(end_of.get(min(sids)) == max(sids) and len(sids) == max(sids) - min(sids) + 1 for sids in runs.values())
    return whole, len(runs)


def wmt21(snapshot: Snapshot) -> Built:
    built = Built("da_wmt21", "da")
    for pair in WMT21_PAIRS:
        xx = pair.replace("-", "")
        xml_path = f"xml/newstest2021.{pair}.all.xml"
        hit_path = f"humaneval/newstest2021-toen/ad-{xx}-good-stnd.csv"
        score_path = f"humaneval/newstest2021-toen/ad-seg-scores-{pair}.csv"
        missing = [p for p in (xml_path, hit_path, score_path) if not snapshot.has(p)]
        if missing:
            built.left_out.append(f"{pair}: {', '.join(missing)} not in the snapshot (no verified document order)")
            continue
        for path in (xml_path, hit_path, score_path):
            built.reads(snapshot, path)
        lines, starts, documents = sorted_document_lines(snapshot.text(xml_path))
        whole, runs = runs_on_boundaries(snapshot.lines(hit_path), starts, len(lines))
        built.checks.setdefault("annotation runs that are whole documents", {})[pair] = f"{whole} of {runs}"
        if whole != runs:
            built.left_out.append(f"{pair}: {runs - whole} of {runs} annotation runs are not whole documents")
            continue
        rows = wmt21_rows(snapshot, pair, lines, documents, score_path, built)
        chrf_check(built, rows)
        built.rows += rows
    return built


def wmt21_rows(snapshot: Snapshot, pair, lines, documents, score_path, built) -> list[dict]:
    source, target = pair.split("-")
    src = snapshot.lines(f"txt/sources/newstest2021.{pair}.src.{source}")
    ref = snapshot.lines(f"txt/references/newstest2021.{pair}.ref.A.{target}")
    doc_of_line = [doc for doc, n in documents for _ in range(n)]
    outputs, rows = {}, []
    for record in snapshot.lines(score_path)[1:]:
        system, sid, raw, z, n = record.split()[:5]
        if is_human(system):
            continue
        name = system.rsplit(".", 1)[0]  # DA names carry the submission id: 'Facebook-AI.4'
        name = WMT21_SYSTEM_FILES.get(name, name)
        path = f"txt/system-outputs/newstest2021.{pair}.hyp.{name}.{target}"
        if name not in outputs:
            outputs[name] = snapshot.lines(path) if snapshot.has(path) else None
        line = lines[int(sid) - 1] if 0 < int(sid) <= len(lines) else None
        if outputs[name] is None or line is None or len(outputs[name]) != len(src):
            built.drop("no system output for the row (file missing, short, or id past the test set)")
        elif scores_in_range(float(raw), float(z), built):
            row = da_row(
                pair,
                src[line],
                outputs[name][line],
                ref[line],
                float(z),
                name,
                doc_of_line[line],
                line + 1,
                2021,
                float(raw),
                int(n),
            )
            rows.append(row)  # fmt: skip
    return rows


def wmt20(snapshot: Snapshot, segments: dict[str, list[dict]]) -> Built:
    """``segments``: the newstest2020 MQM rows per pair (:func:`mqm_sources.newstest2020`)."""
    built = Built("da_wmt20", "da")
    for pair in WMT20_PAIRS:
        score_path = f"manual-evaluation/DA/metrics-ad-seg-scores-{pair}.csv"
        details_path = f"input/details/{pair}.txt"
        if pair not in segments or not (snapshot.has(score_path) and snapshot.has(details_path)):
            built.left_out.append(f"{pair}: no MQM 2020 texts or {score_path} / {details_path} not there")
            continue
        built.reads(snapshot, score_path), built.reads(snapshot, details_path)
        place = {}
        for line in snapshot.lines(details_path):
            number, _, _, doc, position = line.split("\t")
            place[int(number)] = (doc, position)
        texts = {(r["system"], r["doc_id"], r["doc_seg_id"]): r for r in segments[pair] if r["ref"] is not None}
        rows = []
        for record in snapshot.lines(score_path)[1:]:
            system, segment, raw, z, n, sid = record.split()[:6]
            if is_human(system):
                continue
            doc, position = segment.rsplit("::", 1)
            text = texts.get((system, doc, position))
            if place.get(int(sid)) != (doc, position):
                built.drop("line id disagrees with the release's line-to-document table")
            elif text is None:
                built.drop("no text (system or segment not in the MQM 2020 files)")
            elif scores_in_range(float(raw), float(z), built):
                texts_of = (text["src"], text["mt"], text["ref"])
                rows.append(da_row(pair, *texts_of, float(z), system, doc, int(sid), 2020, float(raw), int(n)))
        chrf_check(built, rows)
        built.rows += rows
    return built


def wmt17(snapshot: Snapshot) -> Built:
    built = Built("da_wmt17", "da")
    path = "WMT17/DA-seglevel.csv"
    if not snapshot.has(path):
        built.left_out.append(f"all: {path} not in the snapshot")
        return built
    built.reads(snapshot, path)
    texts, by_pair = {}, defaultdict(list)
    for record in snapshot.lines(path)[1:]:
        pair, _, system, sid, z = record.split()
        if pair not in WMT17_PAIRS:
            continue
        xx = pair.replace("-", "")
        files = (
            f"WMT17/source/newstest2017-{xx}-src.{pair[:2]}",
            f"WMT17/references/newstest2017-{xx}-ref.en",
            f"WMT17/system-outputs/{pair}/newstest2017.{system}.{pair}",
        )
        for file in files:
            if file not in texts:
                texts[file] = snapshot.lines(file) if snapshot.has(file) else None
        src, ref, mt = (texts[f] for f in files)
        line = int(sid) - 1
        if src is None or ref is None or mt is None or not (0 <= line < len(src) == len(ref) == len(mt)):
            built.drop("no text for the row (file missing, lengths differ, or id past the test set)")
        elif math.isfinite(float(z)):
            texts_of = (src[line], mt[line], ref[line])
            by_pair[pair].append(da_row(pair, *texts_of, float(z), system, "", int(sid), 2017, None, None))
        else:
            built.drop("score not finite")
    lowered = sum(
        r["mt"] == r["mt"].lower() and r["ref"] == r["ref"].lower() for rows in by_pair.values() for r in rows
    )
    built.checks["rows whose mt and ref are all lower case (this copy is lower-cased and tokenised)"] = lowered
    for pair, rows in by_pair.items():
        chrf_check(built, rows)
        built.rows += [{k: v for k, v in r.items() if k not in ("raw", "annotators")} for r in rows]
    return built
