"""Every shipped training config runs, as a user runs it: `lightning-metrics fit --config ...` for one step
on a tiny encoder. test_workflow.py takes the fine-tuning configs further (export, score, evaluate)."""

import re
from pathlib import Path

import pytest
import torch
from conftest import REPO, TINY_CORPUS
from test_workflow import TINY_RUN, lm, ok

from lightning_metrics.storage.artifact import is_exported

ONE_STEP = [
    *TINY_RUN,
    "--trainer.limit_train_batches",
    "1",
    "--trainer.limit_val_batches",
    "1",
    "--trainer.val_check_interval",
    "1.0",
]
RUN_HERE = {  # config -> (its run folder, extra arguments: the data each needs, in the test's folder)
    "configs/comet/pretrain_estimator.yaml": (
        "runs/comet_pretrain",
        ["--data.init_args.data", "runs/synthetic_parallel", "--model.init_args.targets", "[score, bleu, chrf]"],
    ),
    "configs/comet/pretrain_ranking.yaml": (
        "runs/comet_pretrain_ranking",
        ["--data.init_args.train", "runs/synthetic_parallel"],
    ),
    "configs/recipes/generalist.yaml": ("runs/generalist", ["--data.init_args.train", "ratings.csv"]),
    "configs/recipes/generalist-multilingual.yaml": (
        "runs/generalist-multilingual",
        ["--data.init_args.train", "ratings.csv"],
    ),
    "configs/recipes/in-house.yaml": (  # starts from the generalist's export (the case above, run first)
        "runs/in-house",
        [
            *("--model.init_args.init_from", "checkpoints/generalist", "--model.init_args.encoder"),
            *("checkpoints/generalist", "--data.init_args.train", "ratings.csv", "--data.init_args.val", "ratings.csv"),
            *("--trainer.check_val_every_n_epoch", "1"),  # the recipe validates every 25 steps across epochs
        ],
    ),
}
RUN_IN_WORKFLOW = {
    "configs/bleurt/pretrain.yaml",
    "configs/bleurt/finetune.yaml",
    "configs/comet/estimator.yaml",
    "configs/comet/referenceless.yaml",
    "configs/comet/ranking.yaml",
    "configs/recipes/error-spans.yaml",  # tests/test_span_workflow.py
    "configs/recipes/metricx-in-house.yaml",  # tests/test_metricx.py, from an imported MetricX
}


def test_every_training_config_is_run_by_a_test():
    shipped = {
        p.relative_to(REPO).as_posix()
        for p in REPO.glob("configs/**/*.yaml")
        if re.search(r"^model:", p.read_text(), re.M)
    }
    assert shipped == set(RUN_HERE) | RUN_IN_WORKFLOW


@pytest.fixture(scope="module")
def folder(tmp_path_factory, document_rows, write_csv):
    """Ratings and a parallel corpus turned into synthetic pairs with sources (`generate`)."""
    here = tmp_path_factory.mktemp("configs")
    write_csv(here / "ratings.csv", document_rows)
    (here / "parallel.tsv").write_text(
        "src\tref\n" + "".join(f"{' '.join(reversed(s.split()))}\t{s}\n" for s in TINY_CORPUS), encoding="utf-8"
    )
    ok(
        lm(
            here,
            "generate",
            "--corpus",
            "parallel.tsv",
            "--out",
            "runs/synthetic_parallel",
            "--pairs-per-sentence",
            "4",
            "--recipe",
            REPO / "configs/data_gen/lexical.yaml",
            "--num-proc",
            "1",
        )
    )
    return here


@pytest.mark.parametrize("config", sorted(RUN_HERE))
def test_config_trains_one_step(folder, tiny_encoder, config):
    run_dir, data = RUN_HERE[config]
    signals = ["--model.init_args.signals.encoder", tiny_encoder] if "recipes/" in config else []
    encoder = [] if "in-house" in config else ["--model.init_args.encoder", tiny_encoder]
    fit = lm(folder, "fit", "--config", REPO / config, *encoder, *signals, *data, *ONE_STEP)
    ok(fit)
    assert "do not fit this model" not in fit.stderr  # a start of the recipe's architecture gives every weight
    last = sorted(folder.glob(f"{run_dir}/lightning_logs/version_*/checkpoints/last.ckpt"))[-1]
    assert torch.load(last, weights_only=True, map_location="cpu")["global_step"] == 1
    if "recipes/" in config:  # its ExportBest callback exports when fit ends
        assert is_exported(folder / "checkpoints" / Path(config).stem)
