"""Fault-injection points for benchmarks/kill_resume.py and tests/test_kill_resume.py.

Each one touches ``flag`` at a chosen point of a real ``fit`` and then blocks, so the test can
SIGKILL the process group exactly there. They change nothing about training itself.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytorch_lightning as pl
import torch

from lightning_metrics.training.resume import AtomicCheckpointIO

HERE = Path(__file__).resolve().parent


def run_fit(config: Path, ckpt: Path | None = None, flag: Path | None = None, timeout: float = 600) -> None:
    """``lightning-metrics fit --config`` in its own process group (log beside the config); with
    ``flag``, SIGKILL the whole group (DDP workers too) once a fault point has touched it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "lightning_metrics.cli", "fit", "--config", str(config)] + (
        ["--ckpt_path", str(ckpt)] if ckpt else []
    )
    log = config.with_suffix(".log")
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=HERE.parent, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        if flag is None:
            if proc.wait(timeout=timeout) != 0:
                raise RuntimeError(f"fit failed:\n{log.read_text()[-3000:]}")
            return
        deadline = time.time() + timeout
        while not flag.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        if not flag.exists():
            os.killpg(proc.pid, signal.SIGKILL)
            raise RuntimeError(f"the fault point was never reached:\n{log.read_text()[-3000:]}")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def kill_config(
    folder: Path,
    model: dict,
    data: dict,
    every: int,
    strategy: str = "single",
    callbacks=(),
    plugins=None,
    seed: int = 0,
) -> Path:
    """A ``fit`` config (JSON, which is YAML) for kill tests: 2 epochs, validation every half epoch,
    ``last.ckpt`` every ``every`` steps in ``folder/ckpt``; ``strategy`` ``ddp`` is ddp_spawn x 2."""
    trainer = {
        "max_epochs": 2,
        "accelerator": "cpu",
        "devices": 1,
        "val_check_interval": 0.5,
        "default_root_dir": str(folder),
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "logger": False,
        "callbacks": [
            {
                "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                "init_args": {
                    "dirpath": str(folder / "ckpt"),
                    "every_n_train_steps": every,
                    "save_top_k": 0,
                    "save_last": True,
                },
            },
            *callbacks,
        ],
    }
    if strategy == "ddp":
        trainer.update(devices=2, strategy="ddp_spawn")
    if plugins:
        trainer["plugins"] = plugins
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"config-{len(list(folder.glob('config-*.yaml')))}.yaml"
    path.write_text(json.dumps({"seed_everything": seed, "model": model, "data": data, "trainer": trainer}))
    return path


def final_weights(folder: Path) -> dict:
    return torch.load(folder / "ckpt" / "last.ckpt", weights_only=True, map_location="cpu")["state_dict"]


def _block(flag: str) -> None:
    Path(flag).touch()
    while True:  # the test's SIGKILL ends this
        time.sleep(60)


class PauseAt(pl.Callback):
    """Block before training batch ``step`` (phase ``train``) or inside the validation that runs
    after step ``step`` (phase ``val``, at its second batch)."""

    def __init__(self, flag: str, step: int, phase: str = "train"):
        self.flag, self.step, self.phase = flag, step, phase

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.phase == "train" and trainer.global_step == self.step:
            _block(self.flag)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        if self.phase == "val" and not trainer.sanity_checking and trainer.global_step == self.step and batch_idx == 1:
            _block(self.flag)


class PauseMidWrite(AtomicCheckpointIO):
    """The real atomic writer, except that checkpoint write number ``write`` (1-based) stops halfway."""

    def __init__(self, flag: str, write: int):
        super().__init__()
        self.flag, self.write, self.count = flag, write, 0

    def _write(self, checkpoint: dict, f) -> None:
        self.count += 1
        if self.count != self.write:
            return super()._write(checkpoint, f)
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        data = buffer.getvalue()
        f.write(data[: len(data) // 2])
        f.flush()
        _block(self.flag)
