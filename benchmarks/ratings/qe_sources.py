"""Ratings without references, and relative ranks.

- **MLQE-PE** (sheffieldnlp/mlqe-pe, ``data/direct-assessments``): Wikipedia (and, for ru-en, Reddit)
  sentences in seven pairs, one NMT system each, rated by three or more translators; train, dev and
  test. ``ref`` is empty: a row for reference-free training. Checks: the TSV's ``z_mean`` is the mean
  of its ``z_scores``, raw scores lie in 0-100, and the ``doc_ids`` file has one line per row.
- **WMT19 DARR** (neulab/BARTScore's ``WMT/<pair>/data.pkl``, gu, kk and lt into English): pairs of
  outputs of one source, the better one first. The file is a pickle; it is read by an unpickler that
  builds only dicts, lists, strings and numbers and refuses everything else, so no code in it runs.
"""

from __future__ import annotations

import ast
import io
import math
import pickle

from built import Built, stripped
from snapshot import Snapshot

from lightning_metrics.errors import InputError

MLQE_PAIRS = ("en-de", "en-zh", "et-en", "ne-en", "ro-en", "ru-en", "si-en")
MLQE_SPLITS = ("train", "dev", "test")
DARR_PAIRS = ("gu-en", "kk-en", "lt-en")


class PlainUnpickler(pickle.Unpickler):
    """Builds containers, strings and numbers only: a pickle that names any class or function is refused."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refused: the pickle asks for {module}.{name}; only plain data is read")


def plain_pickle(data: bytes, where: str):
    try:
        return PlainUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError) as e:
        raise InputError(where, f"not a plain-data pickle ({e})") from None


def mlqe_pe(snapshot: Snapshot) -> Built:
    built = Built("da_mlqe_pe", "da")
    for pair in MLQE_PAIRS:
        for split in MLQE_SPLITS:
            path = f"data/direct-assessments/{split}/{pair}-{split}.tar.gz"
            if not snapshot.has(path):
                built.left_out.append(f"{pair} {split}: {path} not in the snapshot")
                continue
            built.reads(snapshot, path)
            built.rows += mlqe_rows(snapshot.tar_members(path), pair, split, built, f"{snapshot.name}:{path}")
    return built


def mlqe_rows(members: dict[str, bytes], pair: str, split: str, built: Built, where: str) -> list[dict]:
    tsv = [name for name in members if name.endswith(".tsv")]
    docs = [name for name in members if name.endswith(".doc_ids")]
    if len(tsv) != 1 or len(docs) != 1:
        built.left_out.append(f"{pair} {split}: {where} lacks its .tsv or .doc_ids file")
        return []
    records = members[tsv[0]].decode("utf-8").split("\n")
    header, records = records[0].split("\t"), [r for r in records[1:] if r.strip()]
    doc_ids = [d for d in members[docs[0]].decode("utf-8").split("\n")[1:]][: len(records) + 1]
    if len(doc_ids) < len(records) or any(d.strip() for d in doc_ids[len(records) :]):
        built.left_out.append(f"{pair} {split}: {len(records)} rows but a doc_ids file of another length")
        return []
    if "z_mean" not in header:
        built.left_out.append(f"{pair} {split}: no scores (no z_mean column)")
        return []
    header = ["index" if name == "segid" else name for name in header]  # ru-en's test file says segid
    at = {name: header.index(name) for name in ("index", "original", "translation", "scores", "z_scores", "z_mean")}
    rows = []
    for record, doc in zip(records, doc_ids):
        fields = record.split("\t")
        raw, z = ast.literal_eval(fields[at["scores"]]), ast.literal_eval(fields[at["z_scores"]])
        z_mean = float(fields[at["z_mean"]])
        if not (raw and all(0 <= v <= 100 for v in raw) and math.isclose(sum(z) / len(z), z_mean, abs_tol=1e-6)):
            built.drop("raw scores outside 0-100, or z_mean not the mean of z_scores")
            continue
        rows.append({
            "lp": pair, "src": stripped(fields[at["original"]]), "mt": stripped(fields[at["translation"]]), "ref": "",
            "score": z_mean, "system": f"mlqe-pe-{pair}", "doc_id": f"{pair}:{doc.strip()}",
            "seg_id": f"{split}:{fields[at['index']]}", "year": 2020, "domain": "wiki",
            "raw": sum(raw) / len(raw), "annotators": len(raw),
        })  # fmt: skip
    return rows


def wmt19_darr(snapshot: Snapshot) -> Built:
    built = Built("ranks_wmt19_darr", "ranks")
    for pair in DARR_PAIRS:
        path = f"WMT/{pair}/data.pkl"
        if not snapshot.has(path):
            built.left_out.append(f"{pair}: {path} not in the snapshot")
            continue
        built.reads(snapshot, path)
        data = plain_pickle(snapshot.read_bytes(path), f"{snapshot.name}:{path}")
        for key, item in data.items():
            row = darr_row(pair, key, item)
            if row is None:
                built.drop("pair without both texts, or with the two outputs equal")
            else:
                built.rows.append(row)
    return built


def darr_row(pair: str, key, item) -> dict | None:
    try:
        src, ref = item["src"], item["ref"]
        better, worse = item["better"], item["worse"]
        pos, neg = better["sys"], worse["sys"]
        names = better["sys_name"], worse["sys_name"]
    except (KeyError, TypeError):
        return None
    texts = (src, ref, pos, neg)
    if not all(isinstance(t, str) and t.strip() for t in texts) or stripped(pos) == stripped(neg):
        return None
    return {
        "lp": pair, "src": stripped(src), "ref": stripped(ref), "pos": stripped(pos), "neg": stripped(neg),
        "pos_system": str(names[0]), "neg_system": str(names[1]), "doc_id": "", "seg_id": str(key),
        "year": 2019, "domain": "news",
    }  # fmt: skip
