"""The GPU benchmark's CPU dry run (tiny shape, a few rows, both layouts): every workload runs and its
table is written, so benchmarks/gpu/bench.py cannot rot where no GPU is available; unbabel-comet joins,
as comet-score runs it (half precision, cache, per system, batch sweep), where its venv exists. And the
report's ratios and targets on a worked example."""

import json
import subprocess
import sys

import pytest
from conftest import DA_FILE, REPO

sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))
sys.path.insert(0, str(REPO / "benchmarks"))


def test_dry_run_measures_every_workload_and_layout_against_its_peers(tmp_path):
    if not DA_FILE.exists():
        pytest.skip(f"{DA_FILE} is absent; the benchmark reads real DA rows")
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu/bench.py", "--dry-run", "--out", str(tmp_path), "--data", str(DA_FILE)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    rows = {(row["work"], row["layout"]): row for row in results["rows"]}
    assert sorted(rows) == [
        ("BERTScore", "distinct"),
        ("BERTScore", "wmt"),
        ("scoring", "distinct"),
        ("scoring", "wmt"),
        ("training", "wmt"),
    ]
    assert not any("error" in r for r in results["rows"])
    for work, layout in rows:
        sides = rows[work, layout]["sides"]
        assert {"ours 32-true", "ours bf16-mixed"} <= set(sides) if work == "training" else {"ours fp32", "ours bf16"}
        assert all(len(s["runs"]) == 3 and s["min"] <= s["seconds"] <= s["max"] for s in sides.values())
    # bert-score is a dev dependency: its fp32 scores equal ours, bf16 stays close, and its batch is swept
    for layout in ("wmt", "distinct"):
        bertscore = rows["BERTScore", layout]["sides"]
        assert bertscore["ours fp32"]["max_abs_diff_to_peer"] < 1e-5
        assert bertscore["ours bf16"]["max_abs_diff_to_peer"] < 1e-2
        assert set(bertscore["peer fp32"]["sweep"]) == {"16", "32"}
    if (REPO / ".venv-comet" / "bin" / "python").exists():  # make peer-venv: unbabel-comet scores the same weights
        scoring = rows["scoring", "wmt"]["sides"]
        assert scoring["ours fp32"]["max_abs_diff_to_peer"] < 1e-5
        assert scoring["peer fp16"]["dtype"] == "float16" and set(scoring["peer fp16"]["sweep"]) == {"16", "32"}
        assert rows["scoring", "wmt"]["ratios"]["bf16 vs fp16/bf16"]["peer"] == "fp16"
        training = rows["training", "wmt"]["sides"]
        assert training["peer 32"]["steps"] == training["ours 32-true"]["steps"] == 2
        assert all(-1 <= s["dev_kendall"] <= 1 for s in training.values())
    table = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "| scoring | tiny | distinct | 48 | lightning-metrics fp32 |" in table
    assert "| BERTScore | tiny | wmt | 48 | bert-score fp32 |" in table


def timing(seconds: float, rows: int = 100, **extra) -> dict:
    return {"seconds": seconds, "min": seconds, "max": seconds, "runs": [seconds] * 3, "rows": rows, **extra}


def test_ratios_set_equal_precision_classes_side_by_side_and_each_at_its_best():
    import report

    res = {
        "ours": {"fp32": timing(2.0, scores=[0.1, 0.2]), "fp32+tf32": timing(1.0), "bf16": timing(0.5)},
        "peer": {"fp16": timing(1.5), "fp32+tf32": timing(4.0), "fp32": timing(8.0, scores=[0.1, 0.25])},
        "flops": 1e12,
        "peer_name": "unbabel-comet (comet-score)",
    }
    row = report.summarise("scoring", "large", "wmt", res, rate=4e12, rated=1e13)
    ratios = {k: (v["ratio"], v["ours"], v["peer"]) for k, v in row["ratios"].items()}
    assert ratios == {
        "bf16 vs fp16/bf16": (3.0, "bf16", "fp16"),  # 1.5 s / 0.5 s
        "fp32+tf32": (4.0, "fp32+tf32", "fp32+tf32"),
        "fp32": (4.0, "fp32", "fp32"),
        "each at its best": (3.0, "bf16", "fp16"),
    }
    ours = row["sides"]["ours bf16"]
    assert ours["rows_per_s"] == 200 and ours["share_measured"] == 0.5 and ours["share_rated"] == 0.2
    assert row["sides"]["ours fp32"]["max_abs_diff_to_peer"] == pytest.approx(0.05)
    met = {name: ok for name, _, _, ok in report.targets([row])}
    assert met["scoring, large, wmt, bf16 vs fp16/bf16"] is True  # 3.0 >= 3
    assert met["scoring, large, share of the measured bf16 rate"] is True  # 0.5 >= 0.25
    assert met["scoring, large: bf16 over fp32 speed"] is True  # 2.0 / 0.5
    assert met["scoring, large, distinct, bf16 vs fp16/bf16"] is None  # not measured


def test_training_quality_is_the_dev_kendall_against_the_human_scores():
    import report

    human = [0.1, 0.5, 0.3, 0.9]
    res = {
        "ours": {"bf16-mixed": timing(1.0, steps=7, dev_scores=[1, 3, 2, 4])},  # the same order: tau 1
        "peer": {"16-mixed": timing(3.0, steps=7, dev_scores=[4, 3, 2, 1]), "32": timing(2.5, steps=7)},
        "flops": 1e9,
        "peer_name": "unbabel-comet (comet-train)",
        "human": human,
    }
    row = report.summarise("training", "minilm", "wmt", res, rate=None, rated=None)
    assert row["sides"]["ours bf16-mixed"]["dev_kendall"] == pytest.approx(1.0)
    assert row["sides"]["peer 16-mixed"]["dev_kendall"] == pytest.approx(-2 / 3)  # 1 concordant pair, 5 discordant
    assert row["ratios"]["bf16 vs fp16/bf16"]["ratio"] == 3.0 and row["ratios"]["each at its best"]["ratio"] == 2.5
    assert row["sides"]["ours bf16-mixed"]["share_measured"] is None
