"""One timing per implementation and setting, each side at its own best and both alike.

Every timing here loads its model first, outside the timer, then passes ``warmup`` rows (at least 256)
through the same public API it is timed with, then takes ``repeats`` timed passes (their median, min
and max: :func:`workloads.summary`). Settings, per side:

- **ours, scoring and BERTScore**: ``fp32``, ``fp32+tf32`` (CUDA) and ``bf16``;
- **unbabel-comet scoring**, as ``comet-score`` runs it: ``fp16`` (``model.half()``), with TF32,
  length batching, its embedding cache and one ``predict`` per system; and ``fp32+tf32`` and ``fp32``
  with the same cache and calls, for the equal-precision comparison. Its batch size is chosen by a
  sweep (16 to 256) at its own best setting, which the others then use;
- **bert-score** at ``fp32``, ``fp32+tf32``, and under ``torch.autocast`` in ``bf16`` and ``fp16``
  (CUDA), its batch size swept at each;
- **training**, one epoch of COMET's recipe (batch 16, encoder frozen for 30%) on the same rows, TF32
  on (CUDA): ours in ``32-true`` and ``bf16-mixed``, unbabel-comet in ``32``, ``16-mixed`` and
  ``bf16-mixed``; each side then scores the same dev rows, for the quality check.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path

import common
import numpy as np
import torch
import workloads as w

BATCH_SWEEP = (16, 32, 64, 128, 256)


@contextmanager
def tf32(on: bool):
    """TF32 matrix products (``torch.set_float32_matmul_precision('high')``) inside the block, or not."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if on else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def timed(fn, repeats: int) -> tuple[dict, object]:
    """``repeats`` timed calls of ``fn`` (synchronised on CUDA): their summary and the last result."""
    import time

    runs, result = [], None
    for _ in range(repeats):
        w.synchronize()
        start = time.perf_counter()
        result = fn()
        w.synchronize()
        runs.append(time.perf_counter() - start)
    return w.summary(runs), result


def our_settings(gpu: bool) -> dict[str, tuple[str, bool]]:
    """Our inference settings: label -> (precision, TF32)."""
    return {"fp32": ("fp32", False), **({"fp32+tf32": ("fp32", True)} if gpu else {}), "bf16": ("bf16", False)}


# -- scoring ------------------------------------------------------------------------------------
def ours_scoring(folder: Path, rows: list[dict], setting: tuple[str, bool], cfg) -> dict:
    from lightning_metrics import load_metric

    precision, use_tf32 = setting
    metric = load_metric(str(folder), precision=precision)
    columns = {k: [r[k] for r in rows] for k in ("src", "mt", "ref")}
    with tf32(use_tf32):
        metric.score(**{k: v[: cfg.warmup] for k, v in columns.items()}, device=cfg.device, progress=False)
        stats, result = timed(lambda: metric.score(**columns, device=cfg.device, progress=False), cfg.repeats)
    return {**stats, "rows": len(rows), "scores": np.asarray(result.scores)}


def peer_scoring(encoder: Path, weights: Path, data: Path, n_rows: int, cfg) -> dict[str, dict]:
    """unbabel-comet as ``comet-score`` runs it (``model.half()``, TF32, its cache, per system, the batch
    size swept), then at fp32 with and without TF32 (on a GPU; TF32 is a no-op on a CPU) at the batch
    size that sweep chose."""
    base = ["predict", "--data", str(data), "--encoder", str(encoder), "--weights", str(weights)]
    base += ["--cache", "--per-system", "--warmup", str(cfg.warmup), "--repeats", str(cfg.repeats)]
    base += ["--accelerator", "gpu" if cfg.gpu else "cpu"]
    sweep = ",".join(map(str, cfg.batch_sweep))
    out = {"fp16": common.run_peer("comet_peer.py", [*base, "--half", "--tf32", "--batches", sweep], **cfg.peer)}
    fp32_settings = {"fp32+tf32": ["--tf32"], "fp32": []} if cfg.gpu else {"fp32": []}
    for label, flags in fp32_settings.items():
        out[label] = common.run_peer("comet_peer.py", [*base, *flags, "--batch", str(out["fp16"]["batch"])], **cfg.peer)
    return {k: {**w.summary(v["runs"]), "rows": n_rows, "scores": np.asarray(v["scores"]), **_peer_extra(v)}
            for k, v in out.items()}  # fmt: skip


def _peer_extra(result: dict) -> dict:
    return {"batch": result["batch"], "sweep": result.get("sweep") or {}, "dtype": result.get("dtype")}


# -- BERTScore ----------------------------------------------------------------------------------
def ours_bertscore(encoder: Path, layer: int, pairs: tuple[list, list], setting: tuple[str, bool], cfg) -> dict:
    from lightning_metrics.baselines.bertscore import BERTScorer

    cands, refs = pairs
    precision, use_tf32 = setting
    scorer = BERTScorer(str(encoder), layer=layer, device=cfg.device, precision=precision, progress=False)
    with tf32(use_tf32):
        scorer.score(cands[: cfg.warmup], refs[: cfg.warmup])
        stats, result = timed(lambda: scorer.score(cands, refs), cfg.repeats)
    return {**stats, "rows": len(cands), "scores": result.f1}


def peer_bertscore(encoder: Path, layer: int, pairs: tuple[list, list], cfg) -> dict[str, dict]:
    """bert-score at each of its settings, its batch size swept at each."""
    import bert_score

    cands, refs = pairs
    settings = {"fp32": (None, False), "fp32+tf32": (None, True)} if cfg.gpu else {"fp32": (None, False)}
    if cfg.gpu:
        settings.update({"bf16 (autocast)": (torch.bfloat16, True), "fp16 (autocast)": (torch.float16, True)})
    out = {}
    for label, (dtype, use_tf32) in settings.items():
        device_type = "cuda" if cfg.gpu else "cpu"
        autocast = torch.autocast(device_type, dtype=dtype) if dtype is not None else nullcontext()
        with tf32(use_tf32), autocast:
            sweep, best = {}, None
            for batch in cfg.batch_sweep:
                scorer = bert_score.BERTScorer(
                    model_type=str(encoder), num_layers=layer, batch_size=batch, device=cfg.device, lang="en"
                )
                scorer.score(cands[: cfg.warmup], refs[: cfg.warmup])
                stats, result = timed(lambda: scorer.score(cands, refs), 1)
                sweep[batch] = stats["seconds"]
                if best is None or stats["seconds"] < sweep[best[0]]:
                    best = (batch, scorer)
            stats, result = timed(lambda: best[1].score(cands, refs), cfg.repeats)
        out[label] = {
            **stats,
            "rows": len(cands),
            "scores": result[2].float().numpy(),
            "batch": best[0],
            "sweep": sweep,
        }
    return out


# -- training -----------------------------------------------------------------------------------
def ours_training(encoder: Path, data: dict[str, Path], precision: str, cfg, out: Path) -> dict:
    """Median of ``repeats`` epochs of a fresh ``CometEstimator`` (seeded alike) after a warm-up fit, and its
    scores on the dev rows after the last one."""
    from lightning_metrics import load_metric
    from lightning_metrics.training.export import export_checkpoint

    fit_epoch(encoder, data["warmup"], precision, cfg, out)
    runs = []
    for _ in range(cfg.repeats):
        seconds, trainer = fit_epoch(encoder, data["train"], precision, cfg, out)
        runs.append(seconds)
    trainer.save_checkpoint(out / "last.ckpt")
    folder = export_checkpoint(out / "last.ckpt", out / "export", force=True)
    dev = w.read_rows(data["dev"])
    scores = load_metric(str(folder), precision="fp32").score(
        mt=[r["mt"] for r in dev], ref=[r["ref"] for r in dev], src=[r["src"] for r in dev], device=cfg.device
    )
    return {**w.summary(runs), "rows": cfg.train_rows, "steps": trainer.global_step, "dev_scores": scores.scores}


def fit_epoch(encoder: Path, data: Path, precision: str, cfg, out: Path):
    """One epoch of COMET's recipe on ``data`` from a fresh, seeded ``CometEstimator``: (seconds, trainer)."""
    import time

    import pytorch_lightning as pl
    from comet_wmt import estimator  # the COMET recipe's estimator, as the CPU benchmark builds it

    from lightning_metrics.data.modules import RatingsDataModule

    pl.seed_everything(cfg.seed, verbose=False)
    model = estimator(encoder=str(encoder))
    dm = RatingsDataModule(
        train=str(data), val=str(data), encoder=str(encoder), batches={"batch_size": 16, "max_length": 256},
        seed=cfg.seed, layout=model.batch_layout,
    )  # fmt: skip
    trainer = pl.Trainer(
        default_root_dir=out, accelerator="gpu" if cfg.gpu else "cpu", devices=1, precision=precision, max_epochs=1,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        limit_val_batches=0, num_sanity_val_steps=0,
    )  # fmt: skip
    with tf32(cfg.gpu):  # comet-train turns TF32 on; so does this side, where it applies
        w.synchronize()
        start = time.perf_counter()  # after the model and the trainer are built, as on the peer's side
        trainer.fit(model, dm)
        w.synchronize()
    return time.perf_counter() - start, trainer


def peer_training(encoder: Path, data: dict[str, Path], precision: str, cfg) -> dict:
    args = ["train", "--data", str(data["train"]), "--encoder", str(encoder), "--batch", "16"]
    args += [
        "--precision",
        precision,
        "--accelerator",
        "gpu" if cfg.gpu else "cpu",
        "--warmup-data",
        str(data["warmup"]),
    ]
    args += ["--repeats", str(cfg.repeats), "--dev", str(data["dev"])] + (["--tf32"] if cfg.gpu else [])
    result = common.run_peer("comet_peer.py", args, **cfg.peer)
    return {
        **w.summary(result["runs"]),
        "rows": cfg.train_rows,
        "steps": result["steps"],
        "dev_scores": result["dev_scores"],
    }
