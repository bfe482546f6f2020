"""`score` and `load_metric` for built-in metrics: same interface, per segment and per system."""

import json

import numpy as np
import pytest
import sacrebleu

from lightning_metrics.cli import main
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.scoring import load_metric


def test_load_metric_builtin_interface():
    result = load_metric("chrf").score(mt=["the cat sat", "a dog"], ref=["the cat sat", "the dog"])
    assert result.scores == [sacrebleu.sentence_chrf("the cat sat", ["the cat sat"]).score, sacrebleu.sentence_chrf("a dog", ["the dog"]).score]
    assert result.system_score == pytest.approx(np.mean(result.scores))
    assert result.signature.startswith("chrf|nrefs:1|") and "lightning-metrics:" in result.signature
    with pytest.raises(LightningMetricsError, match="unknown metric 'comet'"):
        load_metric("comet")


def test_bertscore_through_load_metric(tiny_encoder):
    metric = load_metric("bertscore", bertscore={"model": str(tiny_encoder), "layer": 1})
    result = metric.score(mt=["The cat sat on the mat."], ref=["The cat sat on the mat."])
    assert result.scores[0] == pytest.approx(1.0, abs=1e-5)


def test_score_cli_files_and_json(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("the cat sat\na dog ran\n")
    (tmp_path / "b.txt").write_text("the cat\na dog ran fast\n")
    (tmp_path / "ref.txt").write_text("the cat sat\nthe dog ran\n")
    out = tmp_path / "s.json"
    args = ["score", "--model", "bleu", "-t", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "-r", str(tmp_path / "ref.txt"), "--json", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].endswith("Segment 0\tscore: 100.0000") and printed[-1].startswith("signature: bleu|nrefs:1")
    systems = json.loads(out.read_text())["systems"]
    expected = sacrebleu.sentence_bleu("a dog ran fast", ["the dog ran"]).score
    assert systems[str(tmp_path / "b.txt")]["scores"][1] == expected


def test_score_cli_mismatched_line_counts(tmp_path, capsys):
    (tmp_path / "hyp.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "ref.txt").write_text("1\n2\n")
    (tmp_path / "src.txt").write_text("1\n2\n3\n")
    assert main(["score", "--model", "chrf", "-t", str(tmp_path / "hyp.txt"), "-r", str(tmp_path / "ref.txt"), "-s", str(tmp_path / "src.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "hyp.txt has 3 lines" in err and "ref.txt has 2 lines" in err and "src.txt has 3 lines" in err


def test_score_cli_data_file_groups_by_system(tmp_path, capsys):
    data = tmp_path / "r.jsonl"
    rows = [{"mt": "a b", "ref": "a b", "system": "x"}, {"mt": "c", "ref": "c d", "system": "y"}, {"mt": "e f", "ref": "e f", "system": "x"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", "--model", "chrf", "--data", str(data), "--only-system", "true"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "x\tscore: 100.0000" and lines[1].startswith("y\tscore: ")
