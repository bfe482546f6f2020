"""Figures: `evaluate --plot` and `plot-run` write readable PNGs; a folder without logs is a one-line error."""

import csv

from lightning_metrics.cli.main import main
from lightning_metrics.evaluation.plots import read_metrics_csv

PNG = b"\x89PNG\r\n\x1a\n"


def test_evaluate_plot_writes_scatter_and_bars(tmp_path, da_rows, write_csv, capsys):
    data = write_csv(tmp_path / "da.csv", da_rows)
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
                "--plot",
                str(tmp_path / "plots"),
            ]
        )
        == 0
    )
    lps = sorted({r["lp"] for r in da_rows})
    for name in [*(f"scatter_{lp}.png" for lp in lps), "kendall.png"]:
        assert (tmp_path / "plots" / name).read_bytes()[:8] == PNG, name
    assert "plots: " in capsys.readouterr().out


def test_plot_run_draws_training_curves(tmp_path, capsys):
    run = tmp_path / "run" / "version_0"
    run.mkdir(parents=True)
    with (run / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["epoch", "step", "train_loss", "val_kendall", "lr-AdamW"])
        for step in range(0, 200, 10):
            writer.writerow([0, step, 2.0 / (1 + step), "" if step % 50 else 0.1 + step / 1000, 1e-4])
    series = read_metrics_csv(run / "metrics.csv")
    assert len(series["train_loss"]) == 20 and len(series["val_kendall"]) == 4
    assert main(["plot-run", str(tmp_path / "run")]) == 0
    assert (run / "curves.png").read_bytes()[:8] == PNG
    assert main(["plot-run", str(tmp_path / "empty-not-there")]) == 2
    assert "no metrics.csv under this folder" in capsys.readouterr().err
