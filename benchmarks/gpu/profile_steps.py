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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench  # noqa: E402
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
    out = Path(args.out)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cfg.gpu else [])
    from score_speed import build_metric

    encoder = w.build_encoder(args.shape, cfg.tokenizer, out, args.seed)
    folder = out / f"metric-{args.shape}" / "estimator"
    if not folder.is_dir():
        folder = build_metric(out / f"metric-{args.shape}", args.seed, str(encoder))
    rows = bench.wmt_rows(Path(cfg.data), args.rows)
    report = out / "profile.txt"
    report.write_text("", encoding="utf-8")
    for precision in ("fp32", "bf16"):
        w.time_ours_scoring(folder, rows[:256], precision, cfg.device)
        with profile(activities=activities) as prof:
            result = w.time_ours_scoring(folder, rows, precision, cfg.device)
        note(
            report,
            f"## scoring, {args.shape}, {precision}, {len(rows)} rows: {result['seconds']:.2f} s\n{tables(prof)}",
        )
    import lightning_metrics.models.base as base  # the same, with every attention kernel allowed (cuDNN's too)

    base.attention_kernels = nullcontext
    result = w.time_ours_scoring(folder, rows, "bf16", cfg.device)
    note(report, f"## scoring, {args.shape}, bf16, cuDNN attention allowed: {result['seconds']:.2f} s")
    base.attention_kernels = w.attention_kernels
    encoder = w.build_encoder(args.train_shape, cfg.tokenizer, out, args.seed)
    data = w.write_rows(rows[:640], out / "profile-train.csv")
    with profile(activities=activities) as prof:
        result = w.time_ours_training(encoder, data, 640, "bf16-mixed", cfg.gpu, out / "fit", args.seed)
    note(report, f"## training, {args.train_shape}, bf16-mixed, 640 rows: {result['seconds']:.2f} s\n{tables(prof)}")


def note(report: Path, text: str) -> None:
    """Print ``text`` and append it to the report at once (a later failure keeps what was measured)."""
    print(text, flush=True)
    with report.open("a", encoding="utf-8") as f:
        f.write(text + "\n\n")


if __name__ == "__main__":
    main()
