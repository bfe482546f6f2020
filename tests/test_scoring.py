"""`score` and `load_metric` for built-in metrics: one interface, sentence-level segments,
corpus-level BLEU/chrF per system, signatures that follow the settings."""

import csv
import json

import numpy as np
import pytest
import sacrebleu
from conftest import DA_FILE

from lightning_metrics.cli.main import main
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics import builtin_names, load_metric, score_many


@pytest.fixture(scope="module")
def one_system(da_rows):
    """Every segment of one real WMT21 system (is-en, Facebook-AI), in file order."""
    with DA_FILE.open(encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["lp"] == "is-en" and r["system"] == "Facebook-AI"]
    assert len(rows) > 500
    return [r["mt"] for r in rows], [r["ref"] for r in rows]


def test_load_metric_builtin_interface():
    mt, ref = ["the cat sat", "a dog"], ["the cat sat", "the dog"]
    result = load_metric("chrf").score(mt=mt, ref=ref)
    assert result.scores == [sacrebleu.sentence_chrf(m, [r]).score for m, r in zip(mt, ref)]
    assert result.system_score == sacrebleu.corpus_chrf(mt, [ref]).score != pytest.approx(np.mean(result.scores))
    assert result.signature.startswith("chrf|spec:chrf|nrefs:1|") and "|system:corpus_chrf|" in result.signature
    with pytest.raises(LightningMetricsError, match="unknown metric 'comet'"):
        load_metric("comet")
    with pytest.raises(LightningMetricsError, match="needs references"):
        load_metric("bleu").score(mt=mt)


@pytest.mark.parametrize("name, corpus", [("bleu", sacrebleu.corpus_bleu), ("chrf", sacrebleu.corpus_chrf)])
def test_system_score_is_sacrebleus_corpus_score_on_a_real_system(one_system, name, corpus, tmp_path, capsys):
    mt, ref = one_system
    sentence = getattr(sacrebleu, f"sentence_{name}")
    result = load_metric(name).score(mt=mt, ref=ref)
    assert result.system_score == pytest.approx(corpus(mt, [ref]).score, abs=1e-9)
    assert result.scores[:50] == [sentence(m, [r]).score for m, r in zip(mt[:50], ref[:50])]
    (tmp_path / "hyp.txt").write_text("\n".join(mt) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(ref) + "\n", encoding="utf-8")
    assert (
        main(
            [
                "score",
                "--model",
                name,
                "-t",
                str(tmp_path / "hyp.txt"),
                "-r",
                str(tmp_path / "ref.txt"),
                "--quiet",
                "true",
                "--json",
                str(tmp_path / "s.json"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out.splitlines()
    system = json.loads((tmp_path / "s.json").read_text())["systems"][str(tmp_path / "hyp.txt")]["system_score"]
    assert system == pytest.approx(corpus(mt, [ref]).score, abs=1e-9)
    assert printed[0] == f"{tmp_path / 'hyp.txt'}\tscore: {system:.4f}" and f"|system:corpus_{name}|" in printed[-1]


def test_signatures_follow_the_settings():
    assert "|case:mixed|tok:13a|smooth:exp|" in str(load_metric("bleu").signature)
    lowered = load_metric("bleu", lowercase=True, tokenize="char", smooth_method="floor")
    assert "|case:lc|tok:char|smooth:floor|" in str(lowered.signature)
    assert lowered.score(mt=["The Cat"], ref=["the cat"]).scores == [
        sacrebleu.sentence_bleu("The Cat", ["the cat"], lowercase=True, tokenize="char", smooth_method="floor").score
    ]
    assert "|nw:2|" in str(load_metric("chrf", word_order=2).signature)
    assert "|stemmer:yes|" in str(load_metric("rougeL", use_stemmer=True).signature)
    with pytest.raises(
        LightningMetricsError,
        match=r"bleu has no option 'layer'; its options are tokenize, smooth_method, lowercase",
    ):
        load_metric("bleu", layer=3)


@pytest.mark.parametrize("command", ["score", "evaluate", "probe"])
def test_one_registry_for_cli_and_load_metric(tiny_encoder, command, capsys):
    names = builtin_names()
    assert {
        "bleu",
        "chrf",
        "rouge1",
        "rouge2",
        "rougeL",
        "bertscore",
        "bertscore_f",
        "bertscore_p",
        "bertscore_r",
    } == set(names)
    assert [load_metric(n).name for n in names] == [n if n != "bertscore" else "bertscore_f" for n in names]
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ", ".join(names) in help_text
    from lightning_metrics.metrics import builtin

    calls, real = [], builtin.bertscore_with_references  # where the BERTScore family is computed
    counting = lambda *a, **k: calls.append("bertscore") or real(*a, **k)  # noqa: E731
    specs = [f"bertscore:model={tiny_encoder}", f"bertscore_f:model={tiny_encoder}"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builtin, "bertscore_with_references", counting)
        alias = score_many(specs, ["The cat sat."], ["The cat is on the mat."])
    assert alias[specs[0]] == alias[specs[1]] and calls == ["bertscore"]  # the alias is one computation


def test_bertscore_through_load_metric(tiny_encoder):
    metric = load_metric("bertscore", model=str(tiny_encoder), layer=1)
    result = metric.score(mt=["The cat sat on the mat."], ref=["The cat sat on the mat."])
    assert result.scores[0] == pytest.approx(1.0, abs=1e-5)
    assert result.signature.startswith(
        f"bertscore_f|spec:bertscore_f:model={tiny_encoder},layer=1|nrefs:1|model:{tiny_encoder}|layer:1|idf:no|"
    )


def test_score_cli_files_and_json(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("the cat sat\na dog ran\n")
    (tmp_path / "b.txt").write_text("the cat\na dog ran fast\n")
    (tmp_path / "ref.txt").write_text("the cat sat\nthe dog ran\n")
    out = tmp_path / "s.json"
    args = [
        "score",
        "--model",
        "bleu",
        "-t",
        str(tmp_path / "a.txt"),
        str(tmp_path / "b.txt"),
        "-r",
        str(tmp_path / "ref.txt"),
        "--json",
        str(out),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].endswith("Segment 0\tscore: 100.0000") and printed[-1].startswith(
        "signature: bleu|spec:bleu|nrefs:1"
    )
    systems = json.loads(out.read_text())["systems"]
    expected = sacrebleu.sentence_bleu("a dog ran fast", ["the dog ran"]).score
    assert systems[str(tmp_path / "b.txt")]["scores"][1] == expected
    assert (
        systems[str(tmp_path / "b.txt")]["system_score"]
        == sacrebleu.corpus_bleu(["the cat", "a dog ran fast"], [["the cat sat", "the dog ran"]]).score
    )


def test_score_cli_mismatched_line_counts(tmp_path, capsys):
    (tmp_path / "hyp.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "ref.txt").write_text("1\n2\n")
    (tmp_path / "src.txt").write_text("1\n2\n3\n")
    assert (
        main(
            [
                "score",
                "--model",
                "chrf",
                "-t",
                str(tmp_path / "hyp.txt"),
                "-r",
                str(tmp_path / "ref.txt"),
                "-s",
                str(tmp_path / "src.txt"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "hyp.txt has 3 lines" in err and "ref.txt has 2 lines" in err and "src.txt has 3 lines" in err


def test_score_cli_data_file_groups_by_system_with_column_flags(tmp_path, capsys):
    data = tmp_path / "r.jsonl"
    rows = [
        {"hyp": "a b", "reference": "a b", "sys": "x"},
        {"hyp": "c", "reference": "c d", "sys": "y"},
        {"hyp": "e f", "reference": "e f", "sys": "x"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        main(
            [
                "score",
                "--model",
                "chrf",
                "--data",
                str(data),
                "--only-system",
                "true",
                "--mt-col",
                "hyp",
                "--ref-col",
                "reference",
                "--system-col",
                "sys",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0] == "x\tscore: 100.0000"
        and lines[1] == f"y\tscore: {sacrebleu.corpus_chrf(['c'], [['c d']]).score:.4f}"
    )
    assert main(["score", "--model", "chrf", "--data", str(data)]) == 2
    assert "missing required column 'mt'" in capsys.readouterr().err
