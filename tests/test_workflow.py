"""The README's workflow as a user types it, each command a subprocess on a tiny model:
``fit --config <shipped config>`` -> ``export`` -> ``score`` -> ``evaluate`` (-> ``probe``), for
every family, and the two-stage BLEURT recipe ``generate`` -> pre-train -> fine-tune."""

import csv
import json
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, TINY_CORPUS
from sacrebleu.metrics import CHRF
from scipy.stats import kendalltau

from data_gen.perturbations import build
from lightning_metrics.cli.main import main
from lightning_metrics.metrics import load_metric

OFFLINE = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "offline",
}
TINY_RUN = [
    "--trainer.max_epochs",
    "1",
    "--trainer.limit_train_batches",
    "4",
    "--trainer.limit_val_batches",
    "2",
    "--trainer.accelerator",
    "cpu",
    "--data.init_args.batches.batch_size",
    "8",
]


def lm(cwd, *args, timeout=300):
    """``lightning-metrics ARGS`` in ``cwd``, as a user's shell runs it; returns the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "lightning_metrics.cli", *map(str, args)],
        cwd=cwd,
        env=OFFLINE,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(proc):
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    return proc.stdout


@pytest.fixture(scope="module")
def ratings(tmp_path_factory, document_rows, write_csv):
    """Whole small documents of real DA rows (every system), so relative ranks exist, as CSV and as text files."""
    picked = document_rows
    folder = tmp_path_factory.mktemp("workflow-data")
    write_csv(folder / "ratings.csv", picked)
    for field, name in (("mt", "hyp.txt"), ("ref", "ref.txt"), ("src", "src.txt")):
        (folder / name).write_text("".join(r[field] + "\n" for r in picked[:24]), encoding="utf-8")
    return folder


FAMILIES = [  # config, run folder, needs references, needs sources
    ("configs/bleurt/finetune.yaml", "runs/bleurt_finetune", True, False),
    ("configs/comet/estimator.yaml", "runs/comet_estimator", True, True),
    ("configs/comet/referenceless.yaml", "runs/comet_referenceless", False, True),
    ("configs/comet/ranking.yaml", "runs/comet_ranking", True, True),
]


@pytest.mark.parametrize(
    "config, run_dir, reads_ref, reads_src", FAMILIES, ids=[c.split("/", 1)[1] for c, *_ in FAMILIES]
)
def test_fit_export_score_evaluate(
    tmp_path, tiny_encoder, ratings, config, run_dir, reads_ref, reads_src, monkeypatch, capsys
):
    for name in ("ratings.csv", "hyp.txt", "ref.txt", "src.txt"):
        (tmp_path / name).write_bytes((ratings / name).read_bytes())
    # the encoder is stated once, on the model: the data module follows it (linked)
    ok(
        lm(
            tmp_path,
            "fit",
            "--config",
            REPO / config,
            "--model.init_args.encoder",
            tiny_encoder,
            "--data.init_args.train",
            "ratings.csv",
            "--data.init_args.split.fraction",
            "0.3",
            *TINY_RUN,
        )
    )
    ckpt = f"{run_dir}/lightning_logs/version_0/checkpoints/last.ckpt"
    assert "-> checkpoints/m" in ok(lm(tmp_path, "export", ckpt, "--out", "checkpoints/m"))

    inputs = ["-t", "hyp.txt", *(["-r", "ref.txt"] if reads_ref else []), *(["-s", "src.txt"] if reads_src else [])]
    printed = ok(lm(tmp_path, "score", "--model", "checkpoints/m", *inputs, "--json", "scores.json")).splitlines()
    assert printed[0].startswith("hyp.txt\tSegment 0\tscore: ") and printed[-1].startswith("signature: m|hash:")
    scores = json.loads((tmp_path / "scores.json").read_text())["systems"]["hyp.txt"]
    assert len(scores["scores"]) == 24 and printed[-2] == f"hyp.txt\tscore: {scores['system_score']:.4f}"

    table = ok(
        lm(
            tmp_path,
            "evaluate",
            "--data",
            "ratings.csv",
            "--metrics",
            "checkpoints/m",
            "chrf",
            "--group",
            "lp",
            "--bootstrap",
            "20",
        )
    )
    rows = list(csv.DictReader((tmp_path / "ratings.csv").open(encoding="utf-8")))
    metric = load_metric(str(tmp_path / "checkpoints" / "m"))
    learned = metric.score(**{f: [r[f] for r in rows] for f in metric.inputs}).scores
    chrf = [CHRF().sentence_score(r["mt"], [r["ref"]]).score for r in rows]
    for label, values in (("checkpoints/m", learned), ("chrf", chrf)):  # each row's Kendall, computed here
        for lp in sorted({r["lp"] for r in rows}):
            idx = [i for i, r in enumerate(rows) if r["lp"] == lp]
            tau = kendalltau([values[i] for i in idx], [float(rows[i]["score"]) for i in idx], variant="b")[0]
            assert re.search(rf"^{re.escape(label)}\s+{lp}\s+{tau:.4f} \[", table, re.M), (label, lp, tau)

    if reads_src:  # probe keeps each sentence's source and perturbs the reference side
        probed = ok(
            lm(
                tmp_path,
                "probe",
                "--metric",
                "checkpoints/m",
                "--corpus",
                "ref.txt",
                "--sources",
                "src.txt",
                "--n",
                "12",
            )
        )
        # the deletion row from the metric's own scores of the same deletions (probe's seeding, here)
        corpus, sources = (
            (tmp_path / "ref.txt").read_text().splitlines(),
            (tmp_path / "src.txt").read_text().splitlines(),
        )
        picked = random.Random(0).sample(range(len(corpus)), min(12, len(corpus)))
        cut = [(k, build("deletion").apply(corpus[i], random.Random(f"0:deletion:{k}"))) for k, i in enumerate(picked)]
        cut = [(k, out) for k, out in cut if out is not None and out != corpus[picked[k]]]
        same = metric.score(mt=[corpus[i] for i in picked], ref=[corpus[i] for i in picked],
                            src=[sources[i] for i in picked]).scores  # fmt: skip
        deleted = metric.score(mt=[o for _, o in cut], ref=[corpus[picked[k]] for k, _ in cut],
                               src=[sources[picked[k]] for k, _ in cut]).scores  # fmt: skip
        below = np.mean([d < same[k] for (k, _), d in zip(cut, deleted)])
        drop = np.mean([same[k] - d for (k, _), d in zip(cut, deleted)])
        assert re.search(rf"^deletion\s+0\.40\s+{len(cut)}\s+{below:.3f}\s+{drop:.4f}$", probed, re.M)
        monkeypatch.chdir(tmp_path)  # a mistake's one line, in process (a traceback would raise here)
        capsys.readouterr()
        assert main(["probe", "--metric", "checkpoints/m", "--corpus", "ref.txt", "--n", "12"]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [
            "error: checkpoints/m reads sources: give --sources FILE (a line per corpus sentence) "
            "or a parallel --corpus table with src and ref columns"
        ]


def test_bleurt_pretrain_then_finetune(tmp_path, tiny_encoder, ratings):
    """generate -> fit configs/bleurt/pretrain.yaml -> fit configs/bleurt/finetune.yaml with init_from -> export
    -> score."""
    (tmp_path / "corpus.txt").write_text("\n".join(TINY_CORPUS) + "\n", encoding="utf-8")
    (tmp_path / "ratings.csv").write_bytes((ratings / "ratings.csv").read_bytes())
    ok(
        lm(
            tmp_path,
            "generate",
            "--corpus",
            "corpus.txt",
            "--out",
            "runs/synthetic",
            "--pairs-per-sentence",
            "4",
            "--recipe",
            REPO / "configs/data_gen/lexical.yaml",
            "--num-proc",
            "1",
        )
    )
    # the targets, stated on the model, reach the data module through the link
    ok(
        lm(
            tmp_path,
            "fit",
            "--config",
            REPO / "configs/bleurt/pretrain.yaml",
            "--model.init_args.encoder",
            tiny_encoder,
            "--model.init_args.targets",
            "[score, bleu, chrf, rougeL]",
            "--model.init_args.objective.loss_weights",
            "{score: 2.0}",
            "--data.init_args.val_fraction",
            "0.2",
            *TINY_RUN,
        )
    )
    pre = "runs/bleurt_pretrain/lightning_logs/version_0/checkpoints/last.ckpt"
    ok(
        lm(
            tmp_path,
            "fit",
            "--config",
            REPO / "configs/bleurt/finetune.yaml",
            "--model.init_args.encoder",
            tiny_encoder,
            "--model.init_args.init_from",
            pre,
            "--data.init_args.train",
            "ratings.csv",
            "--data.init_args.split.fraction",
            "0.3",
            *TINY_RUN,
        )
    )
    ok(
        lm(
            tmp_path,
            "export",
            "runs/bleurt_finetune/lightning_logs/version_0/checkpoints/last.ckpt",
            "--out",
            "checkpoints/bleurt",
        )
    )
    (tmp_path / "h.txt").write_text("The cat sat on the mat.\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("The cat is on the mat.\n", encoding="utf-8")
    assert re.search(
        r"^h\.txt\tscore: -?\d+\.\d{4}$",
        ok(lm(tmp_path, "score", "--model", "checkpoints/bleurt", "-t", "h.txt", "-r", "r.txt")),
        re.M,
    )
