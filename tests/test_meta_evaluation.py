"""Meta-evaluation gaps: `evaluate --darr` (WMT's DARR Kendall, checked on a hand-made table) and
`evaluate` on a table without references for a reference-free metric."""

from __future__ import annotations

import pytest
from conftest import export_tiny

from lightning_metrics.cli.main import main
from lightning_metrics.evaluation.evaluate import evaluate
from lightning_metrics.models import CometReferenceless


def test_darr_kendall_on_a_hand_made_table():
    # source s1: outputs a, b, c with raw 90, 60, 40 -> pairs (a>b), (a>c); b-c differ by 20: no pair
    # source s2: d, e with raw 10, 80 -> pair (e>d); an identical output f = e is never paired with e
    data = {
        "lp": ["x"] * 6,
        "src": ["s1", "s1", "s1", "s2", "s2", "s2"],
        "ref": ["r1"] * 3 + ["r2"] * 3,
        "mt": ["a", "b", "c", "d", "e", "e"],
        "raw": [90, 60, 40, 10, 80, 79],
        "score": [0.0] * 6,
    }
    metric = [0.9, 0.95, 0.1, 0.2, 0.5, 0.6]  # a<b discordant, a>c concordant, e>d concordant (and the copy: e>d)
    ev = evaluate(data, ["m"], group=None, bootstrap=0, scorer=lambda names, *_: {"m": metric}, darr=True)
    tau, pairs = ev.darr["m"]["all"]
    assert pairs == 4 and tau == pytest.approx((3 - 1) / 4)


def test_darr_needs_raw_and_reference_free_evaluate(tmp_path, tiny_encoder, da_rows, write_csv, capsys):
    no_raw = write_csv(tmp_path / "no_raw.csv", [{k: v for k, v in r.items() if k != "raw"} for r in da_rows[:20]])
    assert main(["evaluate", "--data", str(no_raw), "--metrics", "chrf", "--darr", "true"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(no_raw) in err and "raw column" in err
    qe = export_tiny(
        CometReferenceless(encoder=str(tiny_encoder)),
        tiny_encoder,
        write_csv(tmp_path / "r.csv", da_rows[:32]),
        tmp_path,
        "qe",
    )
    no_ref = write_csv(tmp_path / "no_ref.csv", [{k: v for k, v in r.items() if k != "ref"} for r in da_rows[:40]])
    assert (
        main(["evaluate", "--data", str(no_ref), "--metrics", f"myqe={qe}", "--bootstrap", "0", "--quiet", "true"]) == 0
    )
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows if r and r[0] == "myqe"] == ["myqe"]  # its row, by the label given (not in the path)
    assert main(["evaluate", "--data", str(no_ref), "--metrics", "chrf", str(qe)]) != 0  # chrF needs the references
    assert "missing required column 'ref'" in capsys.readouterr().err
