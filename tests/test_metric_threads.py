"""One metric object shared by threads (a web service, a data-loader worker pool): every score call
returns what it found and keeps nothing on the metric, so two threads scoring different rows at once,
and calls interleaved one after another, get exactly what each gets alone."""

from __future__ import annotations

import threading

import pytest
from test_import_unified import CASES, COMMON, LONG, ROWS, SPLIT, write_unified

from lightning_metrics import load_metric
from lightning_metrics.importers import import_metric


def columns(metric, rows: list[dict]) -> dict:
    return {f: [r[f] for r in rows] for f in metric.inputs}


@pytest.fixture
def xcomet(tmp_path, tiny_encoder):
    """An imported XCOMET-layout unified model (random weights): scores and spans."""
    write_unified(tmp_path / "comet", tiny_encoder, {**COMMON, **CASES["xcomet"]})
    return import_metric(tmp_path / "comet", tmp_path / "imported")


def test_two_threads_scoring_different_rows_on_one_metric(xcomet):
    big, small = (ROWS * 12)[:120] + [LONG, SPLIT], ROWS[:7]
    reference = load_metric(str(xcomet), precision="fp32")
    alone = {"big": reference.score(**columns(reference, big), batch_size=8)}
    alone["small"] = reference.score(**columns(reference, small), batch_size=8)
    shared = load_metric(str(xcomet), precision="fp32")
    results, errors, start = {}, [], threading.Barrier(2)

    def work(name, rows, rounds):
        try:
            start.wait()
            for k in range(rounds):
                results[name, k] = shared.score(**columns(shared, rows), batch_size=8)
        except Exception as e:  # noqa: BLE001 (reported below, in the test's thread)
            errors.append(f"{name}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=args) for args in (("big", big, 2), ("small", small, 12))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for (name, _), got in results.items():
        want = alone[name]
        assert got.scores == pytest.approx(want.scores, abs=1e-6)
        assert got.extra["spans"] == want.extra["spans"] and got.truncated == want.truncated
    assert alone["big"].truncated == 1 and alone["small"].truncated == 0


def test_interleaved_calls_keep_nothing_between_them(xcomet):
    metric = load_metric(str(xcomet), precision="fp32")
    first = metric.score(**columns(metric, ROWS + [LONG]))
    second = metric.score(**columns(metric, ROWS[:3]))
    assert len(first.extra["spans"]) == len(ROWS) + 1 and len(second.extra["spans"]) == 3
    assert (first.truncated, second.truncated) == (1, 0)
    assert not hasattr(metric, "spans") and not hasattr(metric, "truncated")  # nothing per call on the metric
