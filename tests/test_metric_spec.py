"""One metric spec everywhere: ``NAME[:key=value,...]``, a folder, ``LABEL=SPEC``; the same text in
``score``, ``evaluate``, ``compare``, ``rerank``, ``probe``, ``export --ensemble`` and ``load_metric``,
recorded in the signature, and one line naming the key for a bad one."""

from __future__ import annotations

import json
import re

import pytest
from conftest import TINY_CORPUS, export_tiny

from lightning_metrics import load_metric
from lightning_metrics.baselines.bertscore import BERTScorer
from lightning_metrics.baselines.lexical import sentence_chrf
from lightning_metrics.cli.main import main
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics import parse_spec, score_many


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory, tiny_encoder, da_rows, write_csv):
    from lightning_metrics.models import BleurtRegressor

    folder = tmp_path_factory.mktemp("spec")
    data = write_csv(folder / "r.csv", da_rows[:16])
    return export_tiny(
        BleurtRegressor(encoder=str(tiny_encoder), head={"hidden_sizes": [8]}), tiny_encoder, data, folder, "m"
    )


MT = ["The cat sat on the mat.", "A dog ran across the field.", "Prices went up this year."]
REF = ["The cat is on the mat.", "A dog ran fast across the green field.", "Prices rose five percent this year."]


def test_parse_builtins_folders_and_labels(tiny_export):
    spec = parse_spec("bertscore:model=default,layer=4,idf=true")
    assert (spec.name, spec.options, spec.label) == (
        "bertscore_f",
        {"model": "default", "layer": 4, "idf": True},
        spec.text,
    )
    assert parse_spec("chrf").options == {} and parse_spec("chrf").is_builtin
    folder = parse_spec(str(tiny_export))
    assert folder.folder == str(tiny_export) and not folder.is_builtin
    labelled = parse_spec(f"mine={tiny_export}")
    assert (labelled.label, labelled.folder) == ("mine", str(tiny_export))
    e5 = parse_spec("e5=bertscore:model=multilingual-e5-small,layer=7")
    assert (e5.label, e5.name, e5.options["layer"]) == ("e5", "bertscore_f", 7)
    # names in any letter case, as sacrebleu and rouge-score write them; the label keeps the given text
    assert [
        (parse_spec(t).name, parse_spec(t).label) for t in ("chrF", "BLEU:tokenize=intl", "RougeL", "BERTScore")
    ] == [
        ("chrf", "chrF"),
        ("bleu", "BLEU:tokenize=intl"),
        ("rougeL", "RougeL"),
        ("bertscore_f", "BERTScore"),
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "bertscore:layr=4",
            "bertscore_f has no option 'layr'; its options are model, layer, idf, baseline, precision",
        ),
        ("bertscore:layer=four", "bertscore_f: layer='four' is not a whole number"),
        ("bertscore:idf=maybe", "bertscore_f: idf='maybe' is not true or false"),
        ("chrf:char_order=0", "chrf: char_order=0 is not at least 1"),
        ("bleu:tokenize=nope", "bleu: tokenize='nope' is not one of sacrebleu's tokenizers"),
        ("chrf:word_order", "options are key=value, separated by commas"),
        ("comet", "unknown metric 'comet'"),
        ("x=checkpoints/no-such-folder", "unknown metric 'checkpoints/no-such-folder'"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_key(text, message):
    with pytest.raises(LightningMetricsError, match=re.escape(message)):
        parse_spec(text)


def test_options_reach_the_metric_and_its_signature(tiny_encoder):
    chrf_pp = load_metric("chrf:word_order=2,char_order=4")
    expected = sentence_chrf(MT, REF, char_order=4, word_order=2)
    assert chrf_pp.score(mt=MT, ref=REF).scores == pytest.approx(expected)
    assert "|spec:chrf:word_order=2,char_order=4|" in chrf_pp.score(mt=MT, ref=REF).signature
    assert "|nc:4|nw:2|" in chrf_pp.score(mt=MT, ref=REF).signature
    spec = f"bertscore:model={tiny_encoder},layer=1,idf=true"
    result = load_metric(spec).score(mt=MT, ref=REF)
    scorer = BERTScorer(tiny_encoder, layer=1, idf=True)
    assert result.scores == pytest.approx(scorer.score(MT, REF).f1.tolist(), abs=1e-6)
    assert f"|spec:bertscore_f:model={tiny_encoder},layer=1,idf=true|" in result.signature
    assert "|layer:1|idf:yes|" in result.signature
    assert load_metric(spec, precision="fp32").score(mt=MT, ref=REF).scores == pytest.approx(result.scores, abs=1e-6)


def test_one_family_with_equal_settings_is_computed_once(tiny_encoder, monkeypatch):
    from lightning_metrics.metrics import builtin

    calls, real = [], builtin.bertscore_with_references  # where the BERTScore family is computed
    monkeypatch.setattr(
        builtin, "bertscore_with_references", lambda *a, **k: calls.append("bertscore") or real(*a, **k)
    )
    specs = [f"bertscore_p:model={tiny_encoder},layer=1", f"p2=bertscore_p:layer=1,model={tiny_encoder}"]
    values = score_many(specs, MT, REF)
    assert list(values) == [specs[0], "p2"] and values[specs[0]] == values["p2"]
    assert calls == ["bertscore"]  # one computation for both labels
    score_many([*specs, f"bertscore_p:model={tiny_encoder},layer=2"], MT, REF)
    assert calls == ["bertscore"] * 3  # another layer is another computation
    with pytest.raises(LightningMetricsError, match="'p2' is given twice: label one as NAME=SPEC"):
        score_many(["p2=chrf", "p2=bleu"], MT, REF)


def test_the_spec_works_in_every_command(tiny_encoder, tmp_path, capsys):
    """score, evaluate, compare and rerank take the same spec; the signature names layer and IDF."""
    (tmp_path / "a.txt").write_text("".join(m + "\n" for m in MT))
    (tmp_path / "b.txt").write_text("".join(r[::-1] + "\n" for r in REF))
    (tmp_path / "ref.txt").write_text("".join(r + "\n" for r in REF))
    spec = f"bertscore:model={tiny_encoder},layer=1,idf=true"
    score = ["score", "--model", spec, "-t", str(tmp_path / "a.txt"), "-r", str(tmp_path / "ref.txt")]
    assert main([*score, "--json", str(tmp_path / "s.json"), "--quiet", "true"]) == 0
    signature = json.loads((tmp_path / "s.json").read_text())["signature"]
    assert "|layer:1|idf:yes|" in signature and "spec:bertscore_f:" in signature
    files = ["-t", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "-r", str(tmp_path / "ref.txt")]
    assert main(["compare", "--model", spec, *files, "--bootstrap", "20", "--quiet", "true"]) == 0
    rows = ["mt,ref,score,lp"] + [f'"{m}","{r}",{i},x-y' for i, (m, r) in enumerate(zip(MT * 3, REF * 3))]
    (tmp_path / "r.csv").write_text("\n".join(rows) + "\n")
    evaluate = ["evaluate", "--data", str(tmp_path / "r.csv"), "--metrics", f"bs={spec}", "chrf:word_order=2"]
    assert main([*evaluate, "--bootstrap", "0", "--quiet", "true"]) == 0
    labels = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert {"bs", "chrf:word_order=2"} <= set(labels)  # a row per metric, by its label
    (tmp_path / "cands.txt").write_text("".join(c + "\n" for c in TINY_CORPUS[:4]))
    rerank = ["rerank", "--model", spec, "-t", str(tmp_path / "cands.txt"), "--num-candidates", "2", "--quiet", "true"]
    assert main(rerank) == 0
    assert (
        main(["score", "--model", "bertscore:layr=1", "-t", str(tmp_path / "a.txt"), "-r", str(tmp_path / "ref.txt")])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no option 'layr'" in err
