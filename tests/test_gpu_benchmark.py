"""The GPU benchmark's CPU dry run (tiny shape, a few rows): every workload runs and its table is written,
so benchmarks/gpu/bench.py cannot rot where no GPU is available. unbabel-comet joins where its venv exists."""

import json
import subprocess
import sys

import pytest
from conftest import DA_FILE, REPO


def test_dry_run_measures_every_workload_against_its_peers(tmp_path):
    if not DA_FILE.exists():
        pytest.skip(f"{DA_FILE} is absent; the benchmark reads real DA rows")
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu/bench.py", "--dry-run", "--out", str(tmp_path), "--data", str(DA_FILE)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    rows = {row["work"]: row for row in results["rows"]}
    assert sorted(rows) == ["BERTScore", "scoring", "training"] and not any("error" in r for r in results["rows"])
    assert set(rows["scoring"]["sides"]) >= {"ours fp32", "ours bf16"}
    assert set(rows["training"]["sides"]) >= {"ours 32-true", "ours bf16-mixed"}
    # bert-score is a dev dependency: its fp32 scores equal ours, and bf16 stays close
    bertscore = rows["BERTScore"]["sides"]
    assert (
        bertscore["ours fp32"]["max_abs_diff_to_peer"] < 1e-5 and bertscore["ours bf16"]["max_abs_diff_to_peer"] < 1e-2
    )
    if (REPO / ".venv-comet" / "bin" / "python").exists():  # make peer-venv: unbabel-comet scores the same weights
        assert rows["scoring"]["sides"]["ours fp32"]["max_abs_diff_to_peer"] < 1e-5
        assert {"peer 32-true", "peer bf16-mixed"} <= set(rows["training"]["sides"])
    table = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert (
        "| scoring | tiny | 48 | lightning-metrics fp32 |" in table
        and "| BERTScore | tiny | 48 | bert-score fp32 |" in table
    )
