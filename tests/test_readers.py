"""Readers: every format, column mapping, and a one-line error for each kind of bad input."""

import json

import pytest

from lightning_metrics.data.readers import read_parallel_text, read_ratings
from lightning_metrics.errors import InputError

HEADER = "lp,src,mt,ref,score,system,doc_id\n"
GOOD = [
    "de-en,Hallo Welt,Hello world,Hello world,0.5,a,d1\n",
    'de-en,"Guten Tag, Welt",Good day,"Good day, world",-1.25,b,d1\n',
    "fr-en,Bonjour,Good morning,Hello,0.1,a,d2\n",
]


def write(path, text, mode="w"):
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_csv_round_trip_and_types(tmp_path):
    ds = read_ratings(write(tmp_path / "r.csv", HEADER + "".join(GOOD)))
    assert ds.num_rows == 3
    assert ds["mt"] == ["Hello world", "Good day", "Good morning"]
    assert ds["score"] == [0.5, -1.25, 0.1]
    assert ds["ref"][1] == "Good day, world"


def test_tsv_jsonl_parquet_and_saved_folder_agree(tmp_path):
    csv_ds = read_ratings(write(tmp_path / "r.csv", HEADER + "".join(GOOD)))
    rows = csv_ds.to_list()
    tsv = "\t".join(rows[0]) + "\n" + "".join("\t".join(str(r[k]) for k in rows[0]) + "\n" for r in rows)
    write(tmp_path / "r.tsv", tsv)
    write(tmp_path / "r.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    csv_ds.to_parquet(str(tmp_path / "r.parquet"))
    csv_ds.save_to_disk(str(tmp_path / "saved"))
    for name in ("r.tsv", "r.jsonl", "r.parquet", "saved"):
        ds = read_ratings(tmp_path / name)
        assert ds["mt"] == csv_ds["mt"] and ds["score"] == csv_ds["score"], name


def test_column_mapping(tmp_path):
    path = write(tmp_path / "r.csv", "hyp,reference,human\nA b,A c,3\n")
    ds = read_ratings(path, columns={"mt": "hyp", "ref": "reference", "score": "human"})
    assert ds.column_names == ["mt", "ref", "score"] and ds["score"] == [3.0]


@pytest.mark.parametrize("suffix", ["csv", "tsv", "jsonl", "parquet", "saved"])
def test_a_mapped_column_that_is_absent_is_an_error_not_the_files_own_column(tmp_path, suffix):
    csv_ds = read_ratings(write(tmp_path / "r.csv", HEADER + "".join(GOOD)))
    rows = csv_ds.to_list()
    path = tmp_path / f"r.{suffix}"
    if suffix == "tsv":
        write(path, "\t".join(rows[0]) + "\n" + "".join("\t".join(str(r[k]) for k in rows[0]) + "\n" for r in rows))
    elif suffix == "jsonl":
        write(path, "".join(json.dumps(r) + "\n" for r in rows))
    elif suffix == "parquet":
        csv_ds.to_parquet(str(path))
    elif suffix == "saved":
        csv_ds.save_to_disk(str(path))
    else:
        path = tmp_path / "r.csv"
    with pytest.raises(InputError) as err:  # the file has an mt column: it must not be used in place of 'hyp'
        read_ratings(path, columns={"mt": "hyp", "score": "quality_z"})
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path))
    assert (
        "mapped column(s) not found: mt -> 'hyp', score -> 'quality_z'" in message
        and "'mt'" in message.split("columns are")[1]
    )


def test_score_with_a_mapped_column_that_is_absent_exits_with_one_line(tmp_path):
    import subprocess
    import sys

    write(tmp_path / "t.csv", HEADER + "".join(GOOD))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightning_metrics.cli",
            "score",
            "--model",
            "chrf",
            "--data",
            "t.csv",
            "--mt-col",
            "nonexistent",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "t.csv: mapped column(s) not found: mt -> 'nonexistent'" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "body, row, problem",
    [
        ("lp,src,ref,score\nde-en,a,b,1\n", None, "missing required column 'mt'"),
        (HEADER + "de-en,x,,y,1,a,d\n", None, "every mt text is empty: is the mt column the right one?"),
        (HEADER + GOOD[0] + GOOD[1] + "de-en,x,y,  ,1,a,d\n", 3, "empty ref text"),
        (HEADER + "de-en,x,y,z,nan,a,d\n", 1, "score is not a finite number: nan"),
        (HEADER + GOOD[0] + "de-en,x,y,z,,a,d\n", 2, "score is not a number: None"),
        (HEADER + "de-en,x,y,z,good,a,d\n", 1, "score is not a number: 'good'"),
        (HEADER + "de-en,x,y,z,inf,a,d\n", 1, "score is not a finite number: inf"),
        ("", None, "empty file"),
        (HEADER, None, "empty file: no data rows"),
        (HEADER + GOOD[0] + "de-en,x,y\n", 2, "has 3 fields but the header has 7"),
    ],
)
def test_bad_csv_gives_one_line_error(tmp_path, body, row, problem):
    path = write(tmp_path / "bad.csv", body)
    with pytest.raises(InputError) as err:
        read_ratings(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert problem in message
    assert err.value.row == row


def test_undecodable_bytes_name_the_row(tmp_path):
    data = (HEADER + GOOD[0] + GOOD[1]).encode() + b"de-en,x,caf\xe9,y,1,a,d\n"
    with pytest.raises(InputError, match=r"bad\.csv: row 3: undecodable bytes \(not UTF-8\)"):
        read_ratings(write(tmp_path / "bad.csv", data, "wb"))


def test_undecodable_bytes_after_a_quoted_newline(tmp_path):
    data = (HEADER + 'de-en,"two\nlines",b,c,1,a,d\n').encode() + b"de-en,\xff,b,c,1,a,d\n"
    with pytest.raises(InputError, match=r"row 2: undecodable"):
        read_ratings(write(tmp_path / "bad.csv", data, "wb"))


def test_jsonl_errors_name_the_line(tmp_path):
    path = write(
        tmp_path / "bad.jsonl", '{"mt": "a", "ref": "b", "score": 1}\n{"mt": "a", "ref": "b", "score": null}\n'
    )
    with pytest.raises(InputError, match=r"row 2: score is not a number: None"):
        read_ratings(path)
    path = write(tmp_path / "bad2.jsonl", '{"mt": "a", "ref": "b", "score": 1}\n{"mt": \n')
    with pytest.raises(InputError, match=r"row 2: invalid JSON"):
        read_ratings(path)


def test_skip_reports_count_and_reason(tmp_path, caplog):
    path = write(tmp_path / "r.csv", HEADER + GOOD[0] + "de-en,x,y,,1,a,d\n" + "de-en,x,y,z,nan,a,d\n" + GOOD[2])
    with caplog.at_level("WARNING"):
        ds = read_ratings(path, on_invalid="skip")
    assert ds["mt"] == ["Hello world", "Good morning"]
    assert "skipped 2 of 4 rows (1 empty ref text; 1 score is not a finite number)" in caplog.text


def test_an_empty_mt_is_a_rated_empty_translation(tmp_path, caplog):
    path = write(tmp_path / "r.csv", HEADER + GOOD[0] + "de-en,x,,y,-25,a,d\n" + GOOD[2])
    with caplog.at_level("WARNING"):
        ds = read_ratings(path)
    assert ds["mt"] == ["Hello world", "", "Good morning"] and ds["score"][1] == -25
    assert "1 row(s) have an empty mt, kept as empty translations" in caplog.text


def test_missing_file_and_unreachable_hub_name(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_ratings(tmp_path / "absent.csv")
    with pytest.raises(InputError, match="not a local file or folder, and not loadable as a hub dataset"):
        read_ratings("no-such-org/no-such-dataset")


def test_corrupt_parquet_and_non_dataset_folder(tmp_path):
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_ratings(write(tmp_path / "x.parquet", b"not parquet", "wb"))
    (tmp_path / "folder").mkdir()
    with pytest.raises(InputError, match="not a dataset saved with save_to_disk"):
        read_ratings(tmp_path / "folder")


def test_parallel_text(tmp_path):
    write(tmp_path / "a.txt", "one\ntwo\n")
    write(tmp_path / "b.txt", "uno\ndos\n")
    write(tmp_path / "ref.txt", "1\n2\n")
    out = read_parallel_text([tmp_path / "a.txt", tmp_path / "b.txt"], ref=tmp_path / "ref.txt")
    assert (
        out["mt"] == [["one", "two"], ["uno", "dos"]]
        and out["ref"] == ["1", "2"]
        and out["systems"] == ["a.txt", "b.txt"]
    )


def test_parallel_text_line_counts_must_match(tmp_path):
    write(tmp_path / "hyp.txt", "one\ntwo\nthree\n")
    write(tmp_path / "ref.txt", "1\n2\n")
    with pytest.raises(InputError) as err:
        read_parallel_text(tmp_path / "hyp.txt", ref=tmp_path / "ref.txt")
    assert "hyp.txt has 3 lines" in str(err.value) and "ref.txt has 2 lines" in str(err.value)


def test_parallel_text_empty_line(tmp_path):
    write(tmp_path / "hyp.txt", "one\n\nthree\n")
    write(tmp_path / "ref.txt", "1\n2\n3\n")
    with pytest.raises(InputError, match=r"hyp\.txt: row 2: empty mt text"):
        read_parallel_text(tmp_path / "hyp.txt", ref=tmp_path / "ref.txt")
    out = read_parallel_text(tmp_path / "hyp.txt", ref=tmp_path / "ref.txt", on_invalid="skip")
    assert out["mt"] == [["one", "three"]] and out["ref"] == ["1", "3"]
