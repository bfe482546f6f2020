"""Readers survive any bytes: truncated, binary, mixed-encoding and huge-line inputs from a seeded
generator, for every format. Each either reads, or fails with one line naming the file (and the row
where it has one); no other exception escapes."""

import json
import random

import pytest

from lightning_metrics.data.readers import read_parallel_text, read_ratings
from lightning_metrics.errors import InputError

ROWS = [
    {"lp": "de-en", "src": f"Quelle {i}", "mt": f"output {i}", "ref": f"reference {i}", "score": i / 7}
    for i in range(20)
]


def valid_bytes(fmt: str, tmp_path) -> bytes:
    if fmt == "csv":
        return (
            "lp,src,mt,ref,score\n" + "".join(f"{r['lp']},{r['src']},{r['mt']},{r['ref']},{r['score']}\n" for r in ROWS)
        ).encode()
    if fmt == "tsv":
        return (
            "lp\tsrc\tmt\tref\tscore\n"
            + "".join(f"{r['lp']}\t{r['src']}\t{r['mt']}\t{r['ref']}\t{r['score']}\n" for r in ROWS)
        ).encode()
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({k: [r[k] for r in ROWS] for k in ROWS[0]}), tmp_path / "valid.parquet")
        return (tmp_path / "valid.parquet").read_bytes()
    return "".join(f"{r['mt']}\n" for r in ROWS).encode()  # txt


def damaged(data: bytes, kind: str, rng: random.Random) -> bytes:
    if kind == "truncated":
        return data[: rng.randrange(1, len(data))]
    if kind == "binary":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000)))
    if kind == "mixed encoding":  # latin-1 and cp1252 bytes spliced into UTF-8
        at = rng.randrange(len(data))
        return data[:at] + "Übersetzung café".encode("latin-1") + b"\x93\x94" + data[at:]
    if kind == "nul bytes":
        at = rng.randrange(len(data))
        return data[:at] + b"\x00" * rng.randrange(1, 5) + data[at:]
    at = data.index(b"\n") + 1  # huge line: one field of 300,000 characters
    if kind == "huge line":
        return data[:at] + b"x" * 300_000 + data[at:]
    return data[:at] + b"x" * 300_000 + b"\xff" + data[at:]  # then bytes that are not UTF-8


def read(fmt: str, path):
    if fmt == "txt":
        return read_parallel_text(str(path), ref=str(path))
    return read_ratings(path)


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet", "txt"])
@pytest.mark.parametrize(
    "kind", ["truncated", "binary", "mixed encoding", "nul bytes", "huge line", "huge line, bad bytes"]
)
def test_any_bytes_read_or_fail_in_one_line(tmp_path, fmt, kind):
    rng = random.Random(f"{fmt}-{kind}")
    valid = valid_bytes(fmt, tmp_path)
    for trial in range(8):
        path = tmp_path / f"input-{trial}.{fmt}"
        path.write_bytes(damaged(valid, kind, rng))
        try:
            read(fmt, path)
        except InputError as e:
            message = str(e)
            assert message.startswith(str(path)) and "\n" not in message, message
            continue
        except Exception as e:  # noqa: BLE001 (the point of the test)
            pytest.fail(f"{fmt}, {kind}, trial {trial}: {type(e).__name__} escaped: {e}")
