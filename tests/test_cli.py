"""The `lightning-metrics` command: evaluate on real data, bad input from the CLI, quickstart."""

import json
import re
import subprocess
import sys

import pytest
import sacrebleu
from scipy import stats

from lightning_metrics.cli.main import main


def test_evaluate_chrf_kendall_equals_sacrebleu_and_scipy(tmp_path, da_rows, capsys, write_csv):
    data = write_csv(tmp_path / "da.csv", da_rows)
    out = tmp_path / "out.json"
    assert (
        main(
            [
                "evaluate",
                "--data",
                str(data),
                "--metrics",
                "bleu",
                "chrf",
                "--group",
                "lp",
                "--bootstrap",
                "20",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    header = ["metric", "lp", "seg_kendall", "seg_pearson", "sys_pearson", "acc_eq", "n", "n_sys"]
    assert table.splitlines()[0].split() == header
    result = json.loads(out.read_text())["metrics"]
    for lp in sorted({r["lp"] for r in da_rows}):
        rows = [r for r in da_rows if r["lp"] == lp]
        chrf = [sacrebleu.sentence_chrf(r["mt"], [r["ref"]]).score for r in rows]
        expected = stats.kendalltau(chrf, [float(r["score"]) for r in rows], variant="b")[0]
        assert result["chrf"][lp]["seg_kendall"] == pytest.approx(expected, abs=1e-6)
        assert result["chrf"][lp]["n"] == len(rows)
        assert f"chrf    {lp}" in table


BAD_INPUTS = [
    ("missing.csv", "lp,ref,score\nde-en,b,1\n", "missing required column 'mt'"),
    ("empty_mt.csv", "mt,ref,score\n,b,1\n ,b,1\n", "every mt text is empty: is the mt column the right one?"),
    ("empty_ref.csv", "mt,ref,score\nok,,1\n", "row 1: empty ref text"),
    ("nan.csv", "mt,ref,score\nok,b,NaN\n", "row 1: score is not a finite number"),
    ("empty.csv", "", "empty file"),
]


@pytest.mark.parametrize("name, body, problem", BAD_INPUTS)
def test_bad_input_from_the_cli_is_one_line(tmp_path, capsys, name, body, problem):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    assert main(["evaluate", "--data", str(path), "--metrics", "chrf"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {path}: {problem}" + err[0].split(problem, 1)[1]]
    assert "Traceback" not in "".join(err)


def test_undecodable_from_the_cli(tmp_path, capsys):
    path = tmp_path / "latin1.csv"
    path.write_bytes("mt,ref,score\nok,b,1\n".encode() + b"caf\xe9,b,1\n")
    assert main(["evaluate", "--data", str(path)]) == 2
    assert f"error: {path}: row 2: undecodable bytes (not UTF-8)" in capsys.readouterr().err


def test_skip_from_the_cli(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_text("mt,ref,score\na b,a b,1\nc d,c e,0.5\nx,,1\nd e,d f,0.1\n", encoding="utf-8")
    assert main(["evaluate", "--data", str(path), "--on-invalid", "skip", "--bootstrap", "0"]) == 0
    captured = capsys.readouterr()
    assert "skipped 1 of 4 rows (1 empty ref text)" in captured.err
    assert "chrf    all" in captured.out


def test_column_flags_and_config_file(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_text("hyp,reference,human\na b,a b,1\nc d,c e,0.5\nd e,x y,0.1\n", encoding="utf-8")
    config = tmp_path / "eval.yaml"
    config.write_text(
        f"data: {path}\nmetrics: [bleu]\nbootstrap: 0\nmt_col: hyp\nref_col: reference\nscore_col: human\n"
    )
    assert main(["evaluate", "--config", str(config)]) == 0
    assert "bleu    all" in capsys.readouterr().out


def test_console_script_quickstart(tmp_path):
    """The whole quickstart (generate, pre-train, export, score, probe) on tiny budgets; the export loads in a
    fresh process."""
    budgets = ["--sentences", "40", "--pairs-per-sentence", "2", "--probe-sentences", "8", "--num-proc", "1"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightning_metrics.cli",
            "quickstart",
            "--out",
            str(tmp_path / "qs"),
            "--checkpoints",
            str(tmp_path / "ck"),
            *budgets,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert re.search(r"^candidate\s+quickstart\s+bleu\s+chrf\s+bertscore$", out, re.M)
    assert re.search(r"^The cat is not on the mat\.\s+-?\d\.\d{4}\s+50\.0000", out, re.M)  # BLEU of the negated example
    assert re.search(r"^chrf\s+all\s", out, re.M) and "Kendall tau between severity and mean drop" in out
    for noise in ("Tip:", "litlogger", "GPU available", "TPU available", "deprecated", "Warning"):
        assert noise not in out + proc.stderr, noise  # other packages' tips and warnings stay out (--verbose)
    folder = str(tmp_path / "ck" / "quickstart")
    score = "score(mt=['a cat'], ref=['the cat']).scores"
    code = f"from lightning_metrics import load_metric; print(load_metric({folder!r}).{score})"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0 and re.fullmatch(r"\[-?\d+\.\d+(e-?\d+)?\]\n", loaded.stdout), loaded.stderr[-2000:]


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["score", "--model", "bleu", "-t", "h.txt", "-r", "r1.txt", "--references", "r2.txt"], "-r"),
        (["evaluate", "--data", "t.csv", "--metrics", "chrf", "--metrics=bleu"], "--metrics"),
        (["export", "--ensemble", "bleu", "--out", "x", "--ensemble", "chrf"], "--ensemble"),
    ],
)
def test_a_repeated_option_of_several_values_is_refused_not_cut_to_its_last(tmp_path, capsys, monkeypatch, argv, flag):
    """argparse keeps only the last ``-r``: scoring against r2 alone would look like success."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {argv[0]}: {flag} given more than once: give all its values after one {flag} (e.g. {flag} A B)"
    ]


@pytest.mark.parametrize("command", ["evaluate", "fit"])
def test_a_config_with_a_yaml_syntax_error_names_file_line_and_column(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("metrics: [chrf\ndata: x.csv\n", encoding="utf-8")
    assert main([command, "--config", "bad.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: bad.yaml: line 2, column 5: YAML syntax error: expected ',' or ']', but got ':' (while parsing a flow "
        "sequence)"
    ]
    assert main([command, "--config=missing.yaml"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "error: missing.yaml: cannot read the config file (No such file or directory)"
    )


def _range_cases():
    """(command, argv, option, range) for every ranged option of every subcommand, with a value just outside it."""
    from lightning_metrics.cli.main import COMMANDS
    from lightning_metrics.cli.ranges import range_of

    cases = []
    for command, (make, _, _) in COMMANDS.items():
        parser = make()
        positionals = ["x" for a in parser._actions if a.required and not a.option_strings]
        for action in parser._actions:
            allowed = range_of(command, action.dest)
            if allowed is None or not action.option_strings:
                continue
            others = [a for a in parser._actions if a.required and a.option_strings and a is not action]
            required = [*positionals, *(x for a in others for x in (a.option_strings[-1], "x"))]
            bad = allowed.high + 0.5 if allowed.open else allowed.low - 1
            bad = int(bad) if action.type in (int,) or "int" in str(action.type) else bad
            values = ["1", str(bad)] if action.nargs == "+" else [str(bad)]
            cases.append(
                (command, [command, *required, action.option_strings[-1], *values], action.option_strings[-1], allowed)
            )
    return cases


@pytest.mark.parametrize(
    "command, argv, option, allowed", _range_cases(), ids=lambda v: v if isinstance(v, str) else None
)
def test_every_numeric_option_outside_its_range_is_one_line_naming_it(
    tmp_path, capsys, monkeypatch, command, argv, option, allowed
):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and err[0].startswith(f"error: {command}: {option}: ") and err[0].endswith(f"is not {allowed}")
    ), err


def test_ranges_are_shown_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "significance level that decides the winner (in (0, 1))" in text
        and "paired bootstrap resamples (at least 1)" in text
    )


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["score", "--model", "bleu", "--seed", "abc"],
            "error: score: Parser key \"seed\": Expected a <class 'int'>. Got value: abc",
        ),
        (["evaluate", "--data", "x.csv", "--nope", "1"], "error: evaluate: unrecognized arguments: --nope 1"),
        (["score", "-t", "h.txt"], "error: score: the following arguments are required: score.model"),
    ],
)
def test_a_parse_error_is_one_line_naming_the_option_not_the_usage_text(capsys, argv, line):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{line} (lightning-metrics {argv[0]} --help lists the options)"]


def _lines(tmp_path, text: str, name: str) -> str:
    (tmp_path / name).write_text(text, encoding="utf-8")
    return str(tmp_path / name)


def test_the_doors_that_used_to_end_in_a_traceback(tmp_path, capsys, monkeypatch):
    """A missing device, a path of the wrong kind, a cache that is a file and too few systems: each is
    one line naming the option or file, the path or column, and the problem; nothing is written."""
    import torch

    hyp = _lines(tmp_path, "the cat sat\na dog ran\n", "a.txt")
    ref = _lines(tmp_path, "the cat sat\nthe dog ran\n", "ref.txt")
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("x")
    cases = [
        (["score", "--model", "chrf", "-t", hyp, "-r", ref, "--json", str(tmp_path / "a-folder")],
         "--json", "is a folder, but a file is written there"),
        (["export", "--ensemble", "chrf", "--data", ref, "--out", str(tmp_path / "a-file")],
         "--out", "is a file, but a folder is written there"),
        (["score", "--model", "chrf", "-t", hyp, "-r", ref, "--json", str(tmp_path / "a-file" / "s.json")],
         "--json", "a-file is a file, so nothing can be written inside it"),
        (["compare", "--model", "chrf", "-t", hyp, "-r", ref], "-t", "a comparison needs two or more"),
    ]  # fmt: skip
    if not torch.cuda.is_available():
        cases.append((["score", "--model", "chrf", "-t", hyp, "-r", ref, "--device", "cuda"], "--device cuda",
                      "this machine has no CUDA device"))  # fmt: skip
    for argv, option, problem in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and option in err and problem in err, err
    table = _lines(tmp_path, "system,mt,ref,seg_id\nA,a cat,the cat,1\nA,a dog,the dog,2\n", "one-system.csv")
    assert main(["compare", "--model", "chrf", "--data", table]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {table}: found 1 system ('A') (column 'system'); a comparison needs two or more"
    candidates = _lines(tmp_path, "a cat\na dog\n", "cands.txt")
    assert main(["rerank", "--model", "chrf", "-t", candidates, "--num-candidates", "1"]) == 2
    assert (
        "1 candidate per source (--num-candidates 1); minimum Bayes risk needs two or more" in capsys.readouterr().err
    )
    monkeypatch.setenv("LIGHTNING_METRICS_CACHE", str(tmp_path / "a-file"))
    assert main(["probe", "--metric", "chrf", "--n", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "LIGHTNING_METRICS_CACHE" in err and "is a file" in err, err
