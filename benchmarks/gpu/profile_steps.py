"""Where the time goes: torch.profiler over our scoring and a few training steps, top operators.

    python benchmarks/gpu/profile_steps.py --out DIR [--shape large] [--rows 2000]

Run after ``bench.py`` (it reuses the encoder and metric folders that bench.py wrote to ``--out``,
building them when missing). Prints, per workload, the operators with the most self CPU time and
the most device time, and writes them to ``DIR/profile.txt``.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import bench  # noqa: E402
import sides  # noqa: E402
import torch  # noqa: E402
import workloads as w  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def tables(prof, rows: int = 18) -> str:
    device = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
    return "\n".join(
        [
            prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows),
            prof.key_averages().table(sort_by=device, row_limit=rows),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/gpu-bench")
    parser.add_argument("--shape", default="minilm", choices=sorted(w.SHAPES))
    parser.add_argument("--train-shape", default="minilm", choices=sorted(w.SHAPES))
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = bench.configure(
        argparse.Namespace(dry_run=False, peer_python=None, peer_path=None, tokenizer=None, data=None, seed=args.seed)
    )
    cfg.warmup, cfg.repeats = 256, 1
    out = Path(args.out)
    from score_speed import build_metric

    encoder = w.build_encoder(args.shape, cfg.tokenizer, out, args.seed)
    folder = out / f"metric-{args.shape}" / "estimator"
    if not folder.is_dir():
        folder = build_metric(out / f"metric-{args.shape}", args.seed, str(encoder))
    rows = w.layout_rows(w.read_rows(Path(cfg.data)), "wmt", args.rows)
    report = out / "profile.txt"
    report.write_text("", encoding="utf-8")
    profile_scoring(folder, rows, cfg, report, args.shape)
    encoder = w.build_encoder(args.train_shape, cfg.tokenizer, out, args.seed)
    data = w.write_rows(rows[:640], out / "profile-train.csv")
    sides.fit_epoch(encoder, data, "bf16-mixed", cfg, out / "fit")  # warm-up, outside the profiler
    with profile(activities=activities(cfg)) as prof:
        seconds, _ = sides.fit_epoch(encoder, data, "bf16-mixed", cfg, out / "fit")
    note(report, f"## training, {args.train_shape}, bf16-mixed, 640 rows: {seconds:.2f} s\n{tables(prof)}")


def activities(cfg) -> list:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cfg.gpu else [])


def profile_scoring(folder: Path, rows: list[dict], cfg, report: Path, shape: str) -> None:
    """Our scoring under the profiler in fp32 and bf16, then bf16 with every attention kernel allowed."""
    for precision in ("fp32", "bf16"):
        with profile(activities=activities(cfg)) as prof:
            result = sides.ours_scoring(folder, rows, (precision, False), cfg)
        note(report, f"## scoring, {shape}, {precision}, {len(rows)} rows: {result['seconds']:.2f} s\n{tables(prof)}")
    import lightning_metrics.models.base as base  # the same, with every attention kernel allowed (cuDNN's too)

    kept = base.attention_kernels
    base.attention_kernels = nullcontext
    try:
        result = sides.ours_scoring(folder, rows, ("bf16", False), cfg)
    finally:
        base.attention_kernels = kept
    note(report, f"## scoring, {shape}, bf16, cuDNN attention allowed: {result['seconds']:.2f} s")


def note(report: Path, text: str) -> None:
    """Print ``text`` and append it to the report at once (a later failure keeps what was measured)."""
    print(text, flush=True)
    with report.open("a", encoding="utf-8") as f:
        f.write(text + "\n\n")


if __name__ == "__main__":
    main()
