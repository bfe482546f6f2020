"""GPU benchmark: lightning-metrics against unbabel-comet and bert-score, side by side in one run.

    bash benchmarks/gpu/run.sh                                   # on a GPU machine (see README.md beside this)
    python benchmarks/gpu/bench.py --dry-run --out runs/gpu-dry  # CPU, tiny shapes: the test that keeps it working

For each encoder shape (MiniLM; a 24-layer, 1024-hidden BERT of XLM-R-large's size), with seeded
random weights built here and the same weights on both sides:

- **scoring**: a ``CometEstimator`` export vs unbabel-comet's ``RegressionMetric.predict`` (batch 64, fp32);
- **BERTScore**: ours vs the bert-score package (batch 64, fp32);
- **training**: one epoch of COMET's recipe (batch 16, encoder frozen 30%), fp32 and bf16-mixed on both sides.

Every row gives rows/s, the ratio to the peer, the largest score difference to the peer's fp32
scores, and the achieved share of the bf16 matrix-product rate measured in the same run. FLOPs
count the useful work only: one forward over each distinct sentence (training: 3 forwards'
worth where the encoder trains, 1 while it is frozen), so a side that encodes a sentence twice
gets no credit for it. Writes ``results.md`` and ``results.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import workloads as w  # noqa: E402

FULL = {
    "shapes": ["minilm", "large"],
    "scoring_rows": 10000,
    "bertscore_rows": 10000,
    "train_rows": {"minilm": 2000, "large": 500},
}
DRY = {"shapes": ["tiny"], "scoring_rows": 48, "bertscore_rows": 48, "train_rows": {"tiny": 32}}
CARRY = w.BENCH / "carry"


def wmt_rows(path: Path, n: int) -> list[dict]:
    """The first ``n`` rows in WMT layout: whole sources, every system's output (sources and references repeat)."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["lp"], r["src"]), []).append(r)
    out: list[dict] = []
    for group in groups.values():
        out += group[: n - len(out)]
        if len(out) >= n:
            break
    return out


def share(flops: float, result: dict | None, rate: float | None) -> float | None:
    return None if result is None or rate is None else flops / result["seconds"] / rate


def scoring(shape: str, encoder: Path, rows: list[dict], cfg, out: Path) -> dict:
    from score_speed import build_metric

    folder = build_metric(out / f"metric-{shape}", cfg.seed, str(encoder))
    data = w.write_rows(rows, out / f"score-{shape}.csv", ("src", "mt", "ref"))
    unique = list(dict.fromkeys(r[k] for r in rows for k in ("src", "mt", "ref")))
    flops = w.forward_flops(w.token_lengths(encoder, unique), shape)
    peer = attempt(
        lambda: w.time_peer_scoring(
            encoder, out / f"metric-{shape}" / "comet.safetensors", data, len(rows), cfg.peer, cfg.gpu
        )
    )
    ours = {p: w.time_ours_scoring(folder, rows, p, cfg.device) for p in ("fp32", "bf16")}
    return {"peer": {"fp32": peer}, "ours": ours, "flops": flops, "peer_name": "unbabel-comet predict"}


def bertscore(shape: str, encoder: Path, rows: list[dict], cfg) -> dict:
    layer = w.SHAPES[shape]["bertscore_layer"]
    cands, refs = [r["mt"] for r in rows], [r["ref"] for r in rows]
    unique = list(dict.fromkeys(cands + refs))
    flops = w.forward_flops(w.token_lengths(encoder, unique), shape, layers=layer)
    peer = attempt(lambda: w.time_peer_bertscore(encoder, layer, cands, refs, cfg.device))
    ours = {p: w.time_ours_bertscore(encoder, layer, cands, refs, p, cfg.device) for p in ("fp32", "bf16")}
    return {"peer": {"fp32": peer}, "ours": ours, "flops": flops, "peer_name": "bert-score"}


def training(shape: str, encoder: Path, rows: list[dict], cfg, out: Path) -> dict:
    data = w.write_rows(rows, out / f"train-{shape}.csv")
    lengths = w.token_lengths(encoder, [r[k] for r in rows for k in ("src", "mt", "ref")], 256)
    flops = w.forward_flops(lengths, shape) * (0.3 * 1 + 0.7 * 3)  # frozen 30% of the epoch: forward only
    result: dict = {"peer": {}, "ours": {}, "flops": flops, "peer_name": "unbabel-comet fit"}
    for precision in ("32-true", "bf16-mixed"):
        result["peer"][precision] = attempt(
            lambda: w.time_peer_training(encoder, data, len(rows), precision, cfg.peer, cfg.gpu)
        )
        result["ours"][precision] = w.time_ours_training(
            encoder, data, len(rows), precision, cfg.gpu, out / "fit", cfg.seed
        )
    return result


def attempt(fn):
    """A peer's timing, or None with the reason printed (a missing peer must not stop the benchmark)."""
    try:
        return fn()
    except (RuntimeError, ImportError, FileNotFoundError, OSError) as e:
        print(f"peer skipped: {e}", flush=True)
        return None


def summarise(work: str, shape: str, res: dict, rate: float | None) -> dict:
    """One table row: throughput per side and precision, ratios to the peer's best, score differences, FLOP shares."""
    peer_best = max((r for r in res["peer"].values() if r), key=lambda r: r["rows"] / r["seconds"], default=None)
    peer_ref = next((r for r in res["peer"].values() if r and "scores" in r), None)
    row = {
        "work": work,
        "shape": shape,
        "rows": next(iter(res["ours"].values()))["rows"],
        "peer": res["peer_name"],
        "sides": {},
    }
    for side in ("peer", "ours"):
        for precision, r in res[side].items():
            if r is None:
                continue
            entry = {
                "rows_per_s": r["rows"] / r["seconds"],
                "seconds": r["seconds"],
                "share_of_bf16_rate": share(res["flops"], r, rate),
            }
            if side == "ours" and peer_best is not None:
                entry["ratio_to_peer_best"] = peer_best["seconds"] / r["seconds"]
            if side == "ours" and peer_ref is not None and "scores" in r:
                entry["max_abs_diff_to_peer"] = float(np.abs(np.asarray(r["scores"]) - peer_ref["scores"]).max())
            row["sides"][f"{side} {precision}"] = entry
    row["tflop"] = res["flops"] / 1e12
    return row


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"GPU benchmark, {meta['date']}, {meta['device']}; torch {meta['torch']}; bf16 matmul rate measured "
        f"{meta['bf16_tflops']:.0f} TFLOP/s"
        if meta["bf16_tflops"]
        else f"dry run, {meta['date']}, {meta['device']}",
        "",
        "| work | shape | rows | side | rows/s | × peer's best | max abs diff to peer fp32 | share of bf16 rate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['work']} | {row['shape']} | | failed: {row['error'][:120]} | | | | |")
            continue
        for side, e in row["sides"].items():
            name = side.replace("peer", row["peer"]).replace("ours", "lightning-metrics")
            ratio = f"{e['ratio_to_peer_best']:.2f}×" if "ratio_to_peer_best" in e else ""
            diff = f"{e['max_abs_diff_to_peer']:.1e}" if "max_abs_diff_to_peer" in e else ""
            part = f"{100 * e['share_of_bf16_rate']:.1f}%" if e["share_of_bf16_rate"] is not None else "n/a"
            lines.append(
                f"| {row['work']} | {row['shape']} | {row['rows']} | {name} | {e['rows_per_s']:,.0f} | {ratio} | "
                f"{diff} | {part} |"
            )
    return "\n".join(lines) + "\n"


def configure(args) -> argparse.Namespace:
    args.gpu = torch.cuda.is_available() and not args.dry_run
    args.device = "cuda" if args.gpu else "cpu"
    local_peer = Path(".venv-comet/bin/python")
    python = args.peer_python or (str(local_peer) if local_peer.exists() else None)
    args.peer = {"python": python or "/nonexistent/peer-python", "path": args.peer_path}
    if args.tokenizer is None:
        carried = CARRY / "tokenizer"
        if carried.is_dir():
            args.tokenizer = str(carried)
        else:
            from lightning_metrics.encoders.loading import default_encoder_path

            args.tokenizer = str(default_encoder_path())
    if args.data is None:
        carried = CARRY / "data" / "wmt21_da_sample.csv"
        args.data = str(carried if carried.is_file() else w.REPO.parent / "shared" / "data" / "wmt21_da_toen.csv")
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/gpu-bench")
    parser.add_argument(
        "--dry-run", action="store_true", help="CPU, tiny shape, a few rows: checks every path, measures nothing"
    )
    parser.add_argument(
        "--work", nargs="+", default=["scoring", "bertscore", "training"], choices=["scoring", "bertscore", "training"]
    )
    parser.add_argument("--shapes", nargs="+", default=None, choices=sorted(w.SHAPES))
    parser.add_argument(
        "--peer-python", default=None, help="python with unbabel-comet (default .venv-comet/bin/python when present)"
    )
    parser.add_argument(
        "--peer-path", default=None, help="PYTHONPATH for the peer (its carried transformers 4 and unbabel-comet)"
    )
    parser.add_argument(
        "--tokenizer", default=None, help="tokenizer folder (default: benchmarks/gpu/carry/tokenizer, else MiniLM's)"
    )
    parser.add_argument(
        "--data", default=None, help="DA ratings CSV (default: the carried sample, else ../shared/data)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = configure(parser.parse_args())
    plan = DRY if args.dry_run else FULL
    out = Path(args.out)
    (out / "fit").mkdir(parents=True, exist_ok=True)
    rate = w.bf16_matmul_rate()
    meta = {
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "bf16_tflops": rate / 1e12 if rate else None,
        "device": torch.cuda.get_device_name() if args.gpu else f"CPU ({platform.processor() or platform.machine()})",
    }
    print(json.dumps(meta), flush=True)
    table = []
    shapes = {shape: w.build_encoder(shape, args.tokenizer, out, args.seed) for shape in args.shapes or plan["shapes"]}
    for work in args.work:  # work by work, so a failure in one leaves the others measured
        for shape, encoder in shapes.items():
            rows = wmt_rows(
                Path(args.data), plan["train_rows"].get(shape, 1000) if work == "training" else plan[f"{work}_rows"]
            )
            try:
                res = {
                    "scoring": lambda: scoring(shape, encoder, rows, args, out),
                    "bertscore": lambda: bertscore(shape, encoder, rows, args),
                    "training": lambda: training(shape, encoder, rows, args, out),
                }[work]()
            except Exception as e:  # noqa: BLE001 (recorded in the results and printed; the run goes on)
                table.append({"work": work, "shape": shape, "error": f"{type(e).__name__}: {e}"})
                print(json.dumps(table[-1]), flush=True)
                continue
            table.append(summarise({"bertscore": "BERTScore"}.get(work, work), shape, res, rate))
            print(json.dumps(table[-1]), flush=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, "rows": table}, indent=1), encoding="utf-8")
    (out / "results.md").write_text(markdown(table, meta), encoding="utf-8")
    print(markdown(table, meta))


if __name__ == "__main__":
    main()
