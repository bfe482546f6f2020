"""`compare`: the paired bootstrap equals sacrebleu's on the same resamples, the t-test equals
scipy's, and the CLI prints, writes JSON and rejects unpaired tables with one line."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import SHARED_DATA
from scipy import stats

from lightning_metrics.cli.main import main
from lightning_metrics.evaluation.significance import compare_systems
from lightning_metrics.metrics import load_metric
from lightning_metrics.metrics.systems import paired_systems_from_table, score_systems

MQM = SHARED_DATA / "wmt21_mqm_newstest.csv"


@pytest.fixture(scope="module")
def three_systems():
    """Three real zh-en systems of WMT21 MQM newstest on the same 300 segments (rows as read)."""
    if not MQM.exists():
        pytest.skip(f"{MQM} is absent; real-data checks need ../shared/data")
    with MQM.open(encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["lp"] == "zh-en" and r["mt"].strip()]
    by_system: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_system.setdefault(r["system"], {})[r["seg_id"]] = r
    names = sorted(by_system)[:3]
    common = sorted(set.intersection(*(set(by_system[n]) for n in names)), key=int)[:300]
    return [by_system[n][s] for n in names for s in common]


def _split(rows):
    return paired_systems_from_table(
        {k: [r[k] for r in rows] for k in ("lp", "seg_id", "src", "mt", "ref", "system")}, "test"
    )


@pytest.mark.parametrize("name, sacrebleu_metric", [("bleu", "BLEU"), ("chrf", "CHRF")])
def test_bootstrap_equals_sacrebleu_paired_bs(three_systems, name, sacrebleu_metric):
    import sacrebleu.metrics
    from sacrebleu.significance import _paired_bs_test

    mt, ref, _ = _split(three_systems)
    a, b = list(mt)[:2]
    metric = load_metric(name)
    results = score_systems(metric, {a: mt[a], b: mt[b]}, ref)
    columns = {n: metric.columns(mt[n], ref[n]) for n in (a, b)}
    ours = compare_systems(metric, results, columns, n_resamples=300, seed=7)[0]
    theirs = getattr(sacrebleu.metrics, sacrebleu_metric)()
    baseline_stats = theirs._extract_corpus_statistics(mt[a], [ref[a]])
    baseline = (baseline_stats, theirs._aggregate_and_compute(baseline_stats))
    _, result = _paired_bs_test({"m": baseline}, b, mt[b], [ref[b]], {"m": theirs}, n_samples=300, seed=7)
    assert ours.score_a == pytest.approx(baseline[1].score, abs=1e-9) and ours.score_b == pytest.approx(
        result["m"].score, abs=1e-9
    )
    assert ours.p_bootstrap == result["m"].p_value
    assert 0 < ours.p_bootstrap <= 1 and ours.ci_low <= ours.delta <= ours.ci_high


def test_ttest_equals_scipy_and_identical_systems_tie(three_systems):
    mt, ref, _ = _split(three_systems)
    metric = load_metric("chrf")
    results = score_systems(metric, {**mt, "copy": mt[list(mt)[0]]}, ref[list(mt)[0]])
    columns = {
        n: metric.columns(results_mt, ref[list(mt)[0]]) for n, results_mt in {**mt, "copy": mt[list(mt)[0]]}.items()
    }
    pairs = compare_systems(metric, results, columns, n_resamples=200, seed=0)
    assert len(pairs) == 6  # every pair of four systems
    for p in pairs:
        expected = stats.ttest_rel(results[p.system_b].scores, results[p.system_a].scores).pvalue
        if p.system_b == "copy" and p.system_a == list(mt)[0]:
            assert p.delta == 0 and p.winner == "tie" and p.p_ttest == 1.0
        else:
            assert p.p_ttest == pytest.approx(expected, rel=1e-12)
    again = compare_systems(metric, results, columns, n_resamples=200, seed=0)
    assert [p.as_dict() for p in again] == [p.as_dict() for p in pairs]  # seeded


def test_compare_cli_files_table_and_bad_input(three_systems, tmp_path, capsys, write_csv):
    mt, ref, _ = _split(three_systems)
    a, b = list(mt)[:2]
    files = {}
    for name, lines in (("a.txt", mt[a]), ("b.txt", mt[b]), ("ref.txt", ref[a])):
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "cmp.json"
    assert (
        main(
            [
                "compare",
                "--model",
                "bleu",
                "-t",
                str(files["a.txt"]),
                str(files["b.txt"]),
                "-r",
                str(files["ref.txt"]),
                "--bootstrap",
                "100",
                "--json",
                str(out),
                "--quiet",
                "true",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    import sacrebleu.metrics
    from sacrebleu.significance import _paired_bs_test

    bleu = sacrebleu.metrics.BLEU()  # the winner by sacrebleu's own paired bootstrap (100 resamples, seed 0)
    base_stats = bleu._extract_corpus_statistics(mt[a], [ref[a]])
    base = (base_stats, bleu._aggregate_and_compute(base_stats))
    _, theirs = _paired_bs_test({"m": base}, b, mt[b], [ref[b]], {"m": bleu}, n_samples=100, seed=0)
    higher = files["b.txt"] if theirs["m"].score > base[1].score else files["a.txt"]
    expected = str(higher) if theirs["m"].p_value < 0.05 else "tie"
    assert len(report["pairs"]) == 1 and report["pairs"][0]["winner"] == expected
    assert "p (bootstrap)" in printed and "system:corpus_bleu" in printed
    # the same systems from a table, rows shuffled: paired by seg_id, same numbers
    table = write_csv(tmp_path / "t.csv", list(reversed(three_systems)))
    assert (
        main(
            [
                "compare",
                "--model",
                "bleu",
                "--data",
                str(table),
                "--bootstrap",
                "100",
                "--json",
                str(out),
                "--quiet",
                "true",
            ]
        )
        == 0
    )
    by_name = json.loads(out.read_text())["systems"]
    assert by_name[a] == pytest.approx(report["systems"][str(files["a.txt"])], abs=1e-9)
    # a system missing a segment: one line naming the file and the system
    short = write_csv(tmp_path / "short.csv", three_systems[1:])
    capsys.readouterr()
    assert main(["compare", "--model", "bleu", "--data", str(short)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(short) in err and "does not cover the same segments" in err, err
    np.testing.assert_equal(len(report["systems"]), 2)
