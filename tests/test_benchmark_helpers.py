"""The benchmark helpers that choose what a result is measured on: document samples, the in-house
suite's domain splits, and the error-span suite's decoding threshold, on examples worked by hand."""

from __future__ import annotations

import sys

import pandas as pd
import pytest
from conftest import REPO, export_tiny
from test_spans import mqm_file

sys.path.insert(0, str(REPO / "benchmarks"))
import cross_year  # noqa: E402
import error_spans  # noqa: E402
import in_house  # noqa: E402


def test_document_sample_takes_whole_documents_in_a_seeded_order():
    rows = {"doc_id": ["a"] * 3 + ["b"] * 2 + ["c"] * 4 + ["d"] * 1, "x": list(range(10))}
    sample = cross_year.document_sample(rows, 4, seed=0)
    docs = set(sample["doc_id"])
    assert all(sample["doc_id"].count(d) == rows["doc_id"].count(d) for d in docs)  # whole documents
    assert len(sample["x"]) >= 4 and sample == cross_year.document_sample(rows, 4, seed=0)
    # it stops at the first document that reaches n: dropping the last one drawn leaves fewer than n
    assert any(len(sample["x"]) - rows["doc_id"].count(d) < 4 for d in docs)
    assert cross_year.document_sample(rows, 100, seed=3)["x"] == list(range(10))  # everything, in order


def test_domain_splits_by_talk_size(tmp_path, monkeypatch):
    sizes = {"t1": 5, "t2": 2, "t3": 9, "t4": 3, "t5": 12, "t6": 25}  # by size: t2 t4 t1 t3 t5 t6
    rows = [
        {"lp": "en-de", "doc": talk, "seg_id": f"{talk}-{k:02d}", "mt": "m", "src": "s", "ref": "r", "score": 0.0}
        for talk, n in sizes.items()
        for k in range(n)
    ]
    ted = tmp_path / "ted.csv"
    pd.DataFrame(rows).to_csv(ted, index=False)
    monkeypatch.setattr(in_house, "TED", ted)
    roles = in_house.write_domain_splits(tmp_path / "splits", "en-de", seed=0)
    assert roles["in_domain_dev"] == ["t4"] and roles["in_domain_test"] == ["t2", "t1"]
    assert roles["pool"] == ["t3", "t5", "t6"] and roles["rows"]["pool"] == 9 + 12 + 25
    pool = pd.read_csv(tmp_path / "splits" / "pool.csv")
    assert len(pool) == 46 and set(pool.doc_id.str.split("#").str[0]) == {"t3", "t5", "t6"}
    assert pool.groupby("doc_id").size().max() <= in_house.UNIT  # units of at most UNIT segments
    assert list(dict.fromkeys(pool.doc_id)) != sorted(set(pool.doc_id))  # shuffled units
    assert set(pd.read_csv(tmp_path / "splits" / "in_domain_test.csv").doc_id) == {"t1", "t2"}


def test_choose_decoding_picks_the_best_dev_f1(tmp_path, tiny_encoder):
    from lightning_metrics.models import UnifiedMetric

    words = ["cat", "dog", "mat", "train"]
    rows = [(f"s{i}", f"talk.{i}", i, "r1", f"the {w}", f"the <v>bad</v> {w} is here", "Accuracy", "Major")
            for i, w in enumerate(words)]  # fmt: skip
    rows += [
        (f"u{i}", f"talk.{i}", i, "r1", f"the {w}", f"the {w} is here", "No-error", "No-error")
        for i, w in enumerate(words)
    ]
    data = mqm_file(tmp_path / "mqm_ted_ende.tsv", rows)
    model = UnifiedMetric(encoder=str(tiny_encoder), segments=["mt", "src"], word_weight=1.0)
    folder = export_tiny(model, tiny_encoder, data, tmp_path, "unified", steps=2, batch_size=8)
    from lightning_metrics.data.mqm import read_mqm

    dev = read_mqm(data).columns
    chosen = error_spans.choose_decoding(str(folder), dev, max_length=64)
    assert [t["threshold"] for t in chosen["tried"]] == list(error_spans.THRESHOLDS)
    best = max(chosen["tried"], key=lambda t: (t["f1"], t["f1_sev"]))
    assert (chosen["threshold"], chosen["f1"]) == (best["threshold"], best["f1"])
    from lightning_metrics.metrics import load_metric  # one threshold's F1 by hand: characters marked and gold

    metric = load_metric(str(folder), max_length=64)
    metric.model.decoding_threshold = 0.5
    spans = metric.score(mt=dev["mt"], src=dev["src"]).extra["spans"]
    marked = [{i for s in row for i in range(s["start"], s["end"])} for row in spans]
    gold = [{i for s in row for i in range(s["start"], s["end"])} for row in dev["spans"]]
    tp, p, g = (sum(len(m & t) for m, t in zip(marked, gold)), sum(map(len, marked)), sum(map(len, gold)))
    f1 = 2 * tp / (p + g) if p + g else 0.0
    assert next(t["f1"] for t in chosen["tried"] if t["threshold"] == 0.5) == pytest.approx(f1)


def test_error_span_test_rows_take_the_reference_from_refA_rows_and_unpack_the_archive(tmp_path):
    import tarfile

    rows = [  # segment 1: two systems and the human reference rated as a system; segment 2: no reference
        ("sysA", "doc1", 1, "r1", "Quelle eins", "Die <v>Katze</v> sass.", "Accuracy", "Major"),
        ("refA", "doc1", 1, "r1", "Quelle eins", "Die Katze sass da.", "No-error", "No-error"),
        ("sysB", "doc1", 1, "r1", "Quelle eins", "Eine Katze sass.", "No-error", "No-error"),
        ("sysA", "doc1", 2, "r1", "Quelle zwei", "Zwei.", "No-error", "No-error"),
    ]
    tsv = tmp_path / "src" / "sxs_mqm_test_ende.tsv"
    tsv.parent.mkdir()
    mqm_file(tsv, rows)
    with tarfile.open(f"{tsv}.tar.gz", "w:gz") as tar:
        tar.add(tsv, arcname=tsv.name)
    tsv.unlink()
    read, skipped = error_spans.test_rows(tsv, tmp_path / "out")  # only the archive is there
    assert skipped == {} and read["system"] == ["sysA", "refA", "sysB", "sysA"]
    assert read["ref"] == ["Die Katze sass da."] * 3 + [None]
    assert error_spans.scorable(read, ("mt", "src"))["system"] == read["system"]
    assert error_spans.scorable(read, ("mt", "src", "ref"))["system"] == ["sysA", "refA", "sysB"]
