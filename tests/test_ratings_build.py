"""benchmarks/ratings/build.py on small releases made by hand in each release's own format
(tests/release_fixtures.py): every join is checked against values worked out by hand."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pickle
import subprocess
import sys

import pytest
import release_fixtures as rf
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "ratings"))
import qe_sources  # noqa: E402
from snapshot import find_snapshot  # noqa: E402

from lightning_metrics.data.readers import read_rating_table  # noqa: E402
from lightning_metrics.errors import InputError  # noqa: E402

BUILD = REPO / "benchmarks" / "ratings" / "build.py"


def run_build(mirrors, out, *extra):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(BUILD), str(mirrors), str(out), *extra], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("releases")
    mirrors = rf.releases(root / "mirrors")
    out = root / "out"
    stdout = run_build(mirrors, out)
    return out, stdout, json.loads((out / "MANIFEST.json").read_text())


def rows_of(out, name):
    path = next(out.glob(f"{name}.*"))
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    return list(csv.DictReader(path.open()))


def test_manifest_names_each_file_with_its_rows_and_hash(built):
    out, stdout, manifest = built
    assert len(stdout.strip().splitlines()) == len(manifest["sources"]) + 1  # one line per source, then the total
    for name, entry in manifest["sources"].items():
        data = (out / entry["file"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["rows"] == len(rows_of(out, name)) == sum(entry["pairs"].values())
    assert all(commit and len(commit) == 40 for commit in manifest["snapshots"].values())


def test_newstest2020_scores_reference_and_the_rows_a_rater_file_garbles(built):
    out, _, manifest = built
    rows = {r["seg_id"]: r for r in rows_of(out, "mqm_newstest2020")}
    assert set(rows) == {1, 2} and {r["system"] for r in rows.values()} == {rf.SYS}  # humans are not systems
    for seg, score in rf.NEWS2020_ENDE_SCORES.items():
        assert rows[seg]["score"] == pytest.approx(score)
    assert rows[1]["ref"] == "Hallo Welt." and rows[1]["mt"] == "Hallo Erde."
    # rater2's garbled target keeps its error in the score but gives no span; rater1's span stays
    assert rows[1]["spans"] == [{"start": 6, "end": 10, "severity": "major"}]
    checks = manifest["sources"]["mqm_newstest2020"]["checks"]
    assert checks["equal to Google's avg_seg_scores"] == {"2020 en-de": "2 of 2"}
    assert checks["annotation rows whose text differs from the segment's (error kept, span not)"] == {"en-de": 1}


def test_newstest2021_documents_are_found_in_the_release_by_text(built):
    out, _, manifest = built
    entry = manifest["sources"]["mqm_newstest2021"]
    assert entry["dropped"] == {"document not found in the test set": 1}
    rows = rows_of(out, "mqm_newstest2021")
    assert [(r["seg_id"], r["src"], r["ref"], r["score"]) for r in rows] == [
        (3, 'A "big" day', "Большой день", -5.0),  # CSV quoting undone; the release's line 3
        (4, "It cost 6000 euros.", "Это стоило 6000 евро.", 0.0),  # "6,000" in the release still matches
    ]
    assert rows[0]["mt"] == "Большой день" and rows[0]["spans"] == [{"start": 0, "end": 7, "severity": "major"}]
    assert entry["checks"]["rated reference equal to the reference file"] == {"en-ru": "2 of 2"}
    assert "en-de: " in " ".join(entry["left_out"])  # the fixture's QE snapshot has no en-de tarball


def test_wmt21_ids_follow_the_documents_sorted_by_id(built):
    out, _, manifest = built
    rows = {int(r["seg_id"]): r for r in rows_of(out, "da_wmt21")}
    # DA id 1 is alpha's only segment (line 3); id 3 is zeta's second (line 2); the human row is not kept
    assert rows[3]["mt"] == "alpha 1" and rows[3]["ref"] == "alpha one" and float(rows[3]["score"]) == 0.9
    assert rows[2]["mt"] == "zeta 2" and rows[2]["doc_id"] == "zeta" and float(rows[2]["raw"]) == 20
    assert set(rows) == {2, 3} and {r["system"] for r in rows.values()} == {"SysX"}
    entry = manifest["sources"]["da_wmt21"]
    assert entry["checks"]["annotation runs that are whole documents"] == {"is-en": "2 of 2"}
    assert any(p.startswith("de-en: xml/newstest2021.de-en.all.xml") for p in entry["left_out"])


def test_a_document_order_the_runs_contradict_leaves_the_pair_out(tmp_path):
    mirrors = rf.releases(tmp_path / "mirrors", runs_whole=False)
    stdout = run_build(mirrors, tmp_path / "out", "--sources", "da_wmt21")
    assert "is-en: 2 of 2 annotation runs are not whole documents" in stdout
    assert json.loads((tmp_path / "out" / "MANIFEST.json").read_text())["sources"]["da_wmt21"]["rows"] == 0


def test_wmt20_da_takes_its_texts_from_mqm_2020(built):
    out, _, manifest = built
    rows = sorted(rows_of(out, "da_wmt20"), key=lambda r: int(r["seg_id"]))
    assert [(r["seg_id"], r["mt"], r["ref"], r["score"], r["annotators"]) for r in rows] == [
        ("1", "Hallo Erde.", "Hallo Welt.", "-0.8", "1"),
        ("2", "Guten Tag.", "Guten Tag.", "0.3", "2"),
    ]
    assert manifest["sources"]["da_wmt20"]["dropped"] == {"no text (system or segment not in the MQM 2020 files)": 1}


def test_wmt17_mlqe_and_darr(built):
    out, _, manifest = built
    assert [(r["mt"], r["ref"], r["seg_id"], r["doc_id"]) for r in rows_of(out, "da_wmt17")] == [
        ("Two!", "Two.", "2", "")
    ]
    mlqe = rows_of(out, "da_mlqe_pe")
    assert [(r["src"], r["ref"], r["score"], r["raw"], r["doc_id"]) for r in mlqe] == [
        ("Sursa.", "", "0.2", "70.0", "ro-en:Cluj")
    ]
    assert manifest["sources"]["da_mlqe_pe"]["dropped"] == {
        "raw scores outside 0-100, or z_mean not the mean of z_scores": 1
    }
    assert [(r["pos"], r["neg"], r["pos_system"]) for r in rows_of(out, "ranks_wmt19_darr")] == [("good", "bad", "A")]
    table = read_rating_table(out / "da_wmt17.csv")  # what the data modules read
    assert table["mt"] == ["Two!"] and table["score"] == [0.5]


class Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_a_pickle_that_names_code_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match=r"refused: the pickle asks for (posix|os)\.system") as e:
        qe_sources.plain_pickle(pickle.dumps({"x": Exploit()}), "data.pkl")
    assert "\n" not in str(e.value)
    assert qe_sources.plain_pickle(pickle.dumps({"a": [1, "b", 2.5]}), "ok.pkl") == {"a": [1, "b", 2.5]}


def test_snapshots_are_read_from_fetch_layout_and_clones(built, tmp_path):
    mirrors = rf.releases(tmp_path / "m")
    bare, clone = find_snapshot(mirrors, "WMT-QE-Task/wmt-qe-2022-data"), find_snapshot(mirrors, "neulab/BARTScore")
    assert bare.bare and not clone.bare and bare.has(next(iter(bare.paths())))
    assert clone.paths() == {"WMT/kk-en/data.pkl"} and find_snapshot(mirrors, "nobody/nothing") is None
