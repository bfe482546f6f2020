"""Scoring speed against unbabel-comet's ``predict``, same architecture and weights; peak RSS on many lines.

    .venv/bin/python benchmarks/score_speed.py [--rows 2000] [--batch 64] [--peer-python .venv-comet/bin/python]
    .venv/bin/python benchmarks/score_speed.py --rss-lines 200000 [--rss-encoder default]

1. Build a ``CometEstimator`` on the default encoder (MiniLM) with a seeded [1024, 256] head,
   export it through ``lightning-metrics export``, and write the same weights under COMET's
   parameter names (``RegressionMetric``: BERT encoder, softmax layer mix, no layer norm).
2. Score 2,000 real triples from ../shared/data/wmt21_da_toen.csv with both, batch 64, CPU,
   fp32, in two layouts: *WMT* (whole test-set sources, every system's output: sources and
   references repeat) and *distinct* (one output per source: nothing repeats).
3. Report rows/s, the ratio, and the largest score difference.

``--rss-lines`` instead scores N lines in a child process and reports its peak RSS.
unbabel-comet pins transformers 4: it runs in a separate venv (see benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import common  # the offline environment, before anything loads transformers
import numpy as np
import torch

REPO = common.REPO
DATA = common.DA


def comet_names(state: dict, n_layers: int) -> dict:
    """Our CometEstimator state dict under unbabel-comet's RegressionMetric parameter names."""
    out = {}
    for key, value in state.items():
        if key.startswith("encoder."):
            out["encoder.model." + key[len("encoder.") :]] = value
        elif key == "layer_mix.weights":
            for i in range(n_layers):
                out[f"layerwise_attention.scalar_parameters.{i}"] = value[i : i + 1].clone()
        elif key == "layer_mix.gamma":
            out["layerwise_attention.gamma"] = value
        elif key.startswith("head."):
            out["estimator.ff." + key[len("head.") :]] = value
    return out


def build_metric(out: Path, seed: int, encoder: str = "default") -> Path:
    """Export a seeded CometEstimator on ``encoder`` (untrained head; standardisation 0/1) through the
    real export path, and write the same weights under COMET's names to ``out/comet.safetensors``."""
    from safetensors.torch import save_file

    from lightning_metrics.models import CometEstimator
    from lightning_metrics.training.export import export_checkpoint

    torch.manual_seed(seed)
    model = CometEstimator(encoder=encoder, head={"hidden_sizes": [1024, 256]}, readout={"layer_transform": "softmax"})
    with torch.no_grad():
        model.layer_mix.weights.normal_(0, 0.5)  # a non-uniform mix, so the mapping is really tested
    out.mkdir(parents=True, exist_ok=True)
    ckpt = out / "estimator.ckpt"
    torch.save(
        {
            "state_dict": model.state_dict(),
            "hyper_parameters": dict(model.hparams),
            "metric_family": "CometEstimator",
            "epoch": 0,
            "global_step": 0,
        },
        ckpt,
    )
    folder = export_checkpoint(ckpt, out / "estimator", force=True)
    save_file(
        {k: v.contiguous() for k, v in comet_names(model.state_dict(), model.n_layers + 1).items()},
        out / "comet.safetensors",
    )
    return folder


def layouts(n: int) -> dict[str, list[dict]]:
    with DATA.open(encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f)]
    by_source: dict[tuple, list[dict]] = {}
    for r in rows:
        by_source.setdefault((r["lp"], r["src"]), []).append(r)
    wmt, distinct = [], []
    for group in by_source.values():
        if len(wmt) < n:
            wmt += group[: n - len(wmt)]
        if len(distinct) < n:
            distinct.append(group[0])
    return {"WMT (all systems per source)": wmt, "distinct (one output per source)": distinct}


def run_ours(folder: Path, rows: list[dict], batch: int) -> tuple[float, np.ndarray]:
    from lightning_metrics import load_metric

    metric = load_metric(str(folder))
    columns = {k: [r[k] for r in rows] for k in ("src", "mt", "ref")}
    metric.score(**{k: v[:64] for k, v in columns.items()}, batch_size=batch)  # warm-up, as the peer's model load does
    start = time.perf_counter()
    scores = metric.score(**columns, batch_size=batch).scores
    return time.perf_counter() - start, np.asarray(scores)


def run_peer(python: str, data: Path, weights: Path, batch: int) -> tuple[float, np.ndarray]:
    from lightning_metrics.encoders.loading import default_encoder_path

    args = ["predict", "--data", str(data), "--encoder", str(default_encoder_path()), "--weights", str(weights)]
    result = common.run_peer("comet_peer.py", [*args, "--batch", str(batch)], python)
    return result["seconds"], np.asarray(result["scores"])


def speed(args) -> None:
    out = Path(args.out)
    folder = build_metric(out, args.seed)
    print(
        "| layout | rows | unique sentences | unbabel-comet rows/s | lightning-metrics rows/s | ratio | max abs score "
        "diff |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, rows in layouts(args.rows).items():
        path = out / f"{name.split()[0].lower()}.csv"
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["src", "mt", "ref"], extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        peer_s, peer = run_peer(args.peer_python, path, out / "comet.safetensors", args.batch)
        ours_s, ours = run_ours(folder, rows, args.batch)
        unique = len({r[k] for r in rows for k in ("src", "mt", "ref")})
        print(
            f"| {name} | {len(rows)} | {unique} | {len(rows) / peer_s:.1f} | {len(rows) / ours_s:.1f} | "
            f"{peer_s / ours_s:.2f}x | {np.abs(peer - ours).max():.2e} |",
            flush=True,
        )
    print(f"\nbatch {args.batch}, fp32, {torch.get_num_threads()} CPU threads; model load excluded on both sides")


def rss(args) -> None:
    """Score ``--rss-lines`` lines (DA rows, cycled, each mt made distinct) in a child; print its peak RSS."""
    if args.rss_child:
        from lightning_metrics import load_metric

        with DATA.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        n = args.rss_lines
        src = [rows[i % len(rows)]["src"] for i in range(n)]
        ref = [rows[i % len(rows)]["ref"] for i in range(n)]
        mt = [f"{rows[i % len(rows)]['mt']} ({i // len(rows)})" for i in range(n)]
        start = time.perf_counter()
        result = load_metric(args.rss_child).score(mt=mt, ref=ref, src=src, batch_size=args.batch, progress=True)
        print(json.dumps({"lines": len(result.scores), "seconds": time.perf_counter() - start}))
        return
    out = Path(args.out)
    folder = build_metric(out, args.seed) if args.rss_encoder == "default" else tiny_metric(out)
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--rss-lines",
            str(args.rss_lines),
            "--rss-child",
            str(folder),
            "--batch",
            str(args.batch),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"scored {child['lines']} lines ({args.rss_encoder} encoder) in {child['seconds']:.0f} s; peak RSS {peak:.0f} "
        "MiB"
    )


def tiny_metric(out: Path) -> Path:
    """A CometEstimator on a tiny random BERT (tests' fixture), exported: same scorer path, little compute."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import build_tiny_encoder

    from lightning_metrics.models import CometEstimator
    from lightning_metrics.training.export import export_checkpoint

    encoder = build_tiny_encoder(out / "tiny-bert")
    model = CometEstimator(encoder=str(encoder), head={"hidden_sizes": [64]})
    torch.save(
        {"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams), "metric_family": "CometEstimator"},
        out / "tiny.ckpt",
    )
    return export_checkpoint(out / "tiny.ckpt", out / "tiny", force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--peer-python", default=".venv-comet/bin/python", help="python of the unbabel-comet venv (make peer-venv)"
    )
    parser.add_argument("--out", default="runs/bench_score")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rss-lines", type=int, default=0, help="instead of the speed table: peak RSS of scoring this many lines"
    )
    parser.add_argument("--rss-encoder", choices=["default", "tiny"], default="default")
    parser.add_argument("--rss-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    (rss if args.rss_lines else speed)(args)


if __name__ == "__main__":
    main()
