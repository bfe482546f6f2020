"""`rerank`: MBR picks the consensus candidate, an oracle reference picks the candidate equal to
it, QE runs with a reference-free export, and bad candidate layouts are one line naming the file."""

from __future__ import annotations

import json

import pytest
from conftest import export_tiny

from lightning_metrics.cli.main import main
from lightning_metrics.metrics import load_metric
from lightning_metrics.metrics.rerank import rerank
from lightning_metrics.models import CometReferenceless

REFS = [
    "the cat sat on the mat near the door",
    "prices went up five percent this year",
    "she left her red umbrella on the bus",
]


def _edits(sentence: str) -> list[str]:
    """Three one-word edits of ``sentence`` (each differs from it by one word, from the others by two)."""
    words = sentence.split()
    return [" ".join(words[:i] + ["zzz"] + words[i + 1 :]) for i in (1, 3, 5)]


def test_mbr_and_oracle_pick_the_reference(tmp_path, capsys):
    groups = [[*_edits(r)[:2], r, _edits(r)[2]] for r in REFS]  # the reference sits among its edits
    choices = rerank(load_metric("chrf"), groups, mode="mbr")
    assert [c.text for c in choices] == REFS and [c.index for c in choices] == [2, 2, 2]
    oracle = rerank(load_metric("bleu"), groups, ref=REFS)  # ref given: mode ref
    assert [c.text for c in oracle] == REFS and all(abs(c.score - 100) < 1e-9 for c in oracle)
    (tmp_path / "cands.txt").write_text("\n".join(t for g in groups for t in g) + "\n")
    (tmp_path / "ref.txt").write_text("\n".join(REFS) + "\n")
    out, report = tmp_path / "best.txt", tmp_path / "best.json"
    assert (
        main(
            [
                "rerank",
                "--model",
                "chrf",
                "-t",
                str(tmp_path / "cands.txt"),
                "--num-candidates",
                "4",
                "--mode",
                "mbr",
                "--out",
                str(out),
                "--json",
                str(report),
                "--quiet",
                "true",
            ]
        )
        == 0
    )
    assert out.read_text().splitlines() == REFS and [c["index"] for c in json.loads(report.read_text())["choices"]] == [
        2,
        2,
        2,
    ]
    # 12 lines are not whole sources of 5; a reference file with another count
    capsys.readouterr()
    assert main(["rerank", "--model", "chrf", "-t", str(tmp_path / "cands.txt"), "--num-candidates", "5"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cands.txt" in err and "not a whole number of sources" in err, err
    (tmp_path / "two.txt").write_text("\n".join(REFS[:2]) + "\n")
    assert (
        main(
            [
                "rerank",
                "--model",
                "bleu",
                "-t",
                str(tmp_path / "cands.txt"),
                "--num-candidates",
                "4",
                "-r",
                str(tmp_path / "two.txt"),
            ]
        )
        != 0
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "two.txt" in err and "3 sources" in err, err


def test_qe_rerank_from_a_table(tmp_path, tiny_encoder, da_rows, write_csv, capsys):
    data = write_csv(tmp_path / "r.csv", da_rows[:32])
    qe = load_metric(
        str(export_tiny(CometReferenceless(encoder=str(tiny_encoder)), tiny_encoder, data, tmp_path, "qe"))
    )
    rows = [{"id": f"s{k}", "src": f"source {k}", "mt": m} for k, r in enumerate(REFS) for m in [r, *_edits(r)]]
    table = write_csv(tmp_path / "cands.csv", rows)
    assert (
        main(
            [
                "rerank",
                "--model",
                str(qe.path),
                "--data",
                str(table),
                "--source-id-col",
                "id",
                "--json",
                str(tmp_path / "q.json"),
                "--quiet",
                "true",
            ]
        )
        == 0
    )
    chosen = json.loads((tmp_path / "q.json").read_text())["choices"]
    expected = rerank(qe, [[r, *_edits(r)] for r in REFS], src=[f"source {k}" for k in range(3)])
    assert [c["index"] for c in chosen] == [c.index for c in expected]
    first = [REFS[0], *_edits(REFS[0])]
    assert chosen[0]["score"] == pytest.approx(max(qe.score(mt=first, src=["source 0"] * 4).scores), abs=1e-6)
    uneven = write_csv(tmp_path / "uneven.csv", rows[:-1])
    capsys.readouterr()
    assert main(["rerank", "--model", str(qe.path), "--data", str(uneven), "--source-id-col", "id"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "uneven.csv: row 10" in err and "'s2' has 3 candidates" in err, err


def test_chunks_keep_each_sources_pairs_together():
    """MBR rows (candidate, pseudo-reference) of one source stay contiguous in scoring order, so a
    source's candidates are embedded in one chunk; sorting the references alphabetically would not."""
    from lightning_metrics.metrics.learned import chunk_order

    groups = [[*_edits(r), r] for r in REFS]
    owner, mt, ref = [], [], []
    for s, group in enumerate(groups):
        for i, hyp in enumerate(group):
            for j, pseudo in enumerate(group):
                if j != i:
                    owner.append(s), mt.append(hyp), ref.append(pseudo)
    sources = [owner[i] for i in chunk_order({"mt": mt, "ref": ref})]
    assert sources == sorted(sources)  # each source's 12 rows form one run, sources in input order
    assert [owner[i] for i in sorted(range(len(ref)), key=ref.__getitem__)] != sorted(
        owner
    )  # the old order scattered them
    # a WMT table: every system's output of a segment shares its reference, so they group together
    table = {"mt": ["a1", "b1", "a2", "b2"], "ref": ["r1", "r2", "r1", "r2"]}
    assert chunk_order(table) == [0, 2, 1, 3]


def test_a_mapped_source_id_column_must_exist(tmp_path, capsys):
    """--source-id-col names the grouping column: when it is absent, the file's own source_id is not used silently."""
    from lightning_metrics.cli.main import main

    (tmp_path / "c.csv").write_text("source_id,mt,src\n0,a,x\n0,b,x\n1,c,y\n1,d,y\n", encoding="utf-8")
    assert (
        main(
            ["rerank", "--model", "chrf", "--data", str(tmp_path / "c.csv"), "--source-id-col", "sid", "--mode", "mbr"]
        )
        == 2
    )
    assert (
        capsys.readouterr().err.strip()
        == f"error: {tmp_path / 'c.csv'}: mapped column(s) not found: source_id -> 'sid'; "
        "the file's columns are ['mt', 'source_id', 'src']"
    )
