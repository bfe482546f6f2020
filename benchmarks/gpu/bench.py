"""GPU benchmark: lightning-metrics against unbabel-comet and bert-score, side by side in one run, each
side at its own best and both alike (:mod:`sides`).

    bash benchmarks/gpu/run.sh                                   # on a GPU machine (see README.md beside this)
    python benchmarks/gpu/bench.py --dry-run --out runs/gpu-dry  # CPU, tiny shapes: the test that keeps it working

For each encoder shape (MiniLM; a 24-layer, 1024-hidden BERT of XLM-R-large's size), with seeded random
weights built here and the same weights on both sides, and each row layout (``wmt``: every system of a
source; ``distinct``: every row a new source):

- **scoring**: a ``CometEstimator`` export against unbabel-comet as ``comet-score`` runs it;
- **BERTScore**: ours against the bert-score package;
- **training** (WMT layout): one epoch of COMET's recipe on both sides, and the dev Kendall each reaches.

Every figure is the median of ``--repeats`` timed passes (min and max beside it) after the same warm-up.
The headline ratio compares equal precision classes: our bf16 against the peer's fp16/bf16, our fp32
against its fp32, both with TF32 or both without; "each at its best" is given beside it. FLOPs count
the useful work once: one forward over each distinct sentence (training: three where the encoder
trains, one while it is frozen), as a share of the bf16 matrix-product rate measured in the same run
and of the device's rated dense bf16 peak. Writes ``results.md`` and ``results.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import common  # noqa: E402, F401  (the offline environment, before transformers loads)
import numpy as np  # noqa: E402
import report  # noqa: E402
import sides  # noqa: E402
import torch  # noqa: E402
import workloads as w  # noqa: E402

# rows per scoring and BERTScore run and per training epoch, sized from the 2026-12-04 run's rates to fit
# about 15 minutes of device time (an estimate); the distinct layout has about 3,000 sources to draw on
FULL = {
    "shapes": ["minilm", "large"],
    "rows": {"minilm": 2000, "large": 1000},
    "train_rows": {"minilm": 1000, "large": 300},
}
DRY = {"shapes": ["tiny"], "rows": {"tiny": 48}, "train_rows": {"tiny": 32}}
CARRY = w.BENCH / "carry"
LAYOUTS = ("wmt", "distinct")


def scoring(shape: str, encoder: Path, rows: list[dict], cfg, out: Path) -> dict:
    from score_speed import build_metric

    folder = build_metric(out / f"metric-{shape}", cfg.seed, str(encoder))
    data = w.write_rows(rows, out / f"score-{shape}.csv", ("src", "mt", "ref", "system"))
    unique = list(dict.fromkeys(r[k] for r in rows for k in ("src", "mt", "ref")))
    flops = w.forward_flops(w.token_lengths(encoder, unique), shape)
    peer = attempt(
        lambda: sides.peer_scoring(encoder, out / f"metric-{shape}" / "comet.safetensors", data, len(rows), cfg)
    )
    ours = {k: sides.ours_scoring(folder, rows, s, cfg) for k, s in sides.our_settings(cfg.gpu).items()}
    return {"peer": peer or {}, "ours": ours, "flops": flops, "peer_name": "unbabel-comet (comet-score)"}


def bertscore(shape: str, encoder: Path, rows: list[dict], cfg) -> dict:
    layer = w.SHAPES[shape]["bertscore_layer"]
    pairs = ([r["mt"] for r in rows], [r["ref"] for r in rows])
    flops = w.forward_flops(w.token_lengths(encoder, list(dict.fromkeys(pairs[0] + pairs[1]))), shape, layers=layer)
    peer = attempt(lambda: sides.peer_bertscore(encoder, layer, pairs, cfg))
    ours = {k: sides.ours_bertscore(encoder, layer, pairs, s, cfg) for k, s in sides.our_settings(cfg.gpu).items()}
    return {"peer": peer or {}, "ours": ours, "flops": flops, "peer_name": "bert-score"}


def training(shape: str, encoder: Path, rows: list[dict], cfg, out: Path) -> dict:
    n = cfg.train_rows
    seen = {r["src"] for r in rows[:n]}
    dev = [r for r in rows[n:] if r["src"] not in seen][: max(n // 4, 32)]  # dev sources never trained on
    parts = {"train": rows[:n], "warmup": rows[: max(cfg.warmup, 16)], "dev": dev}
    data = {k: w.write_rows(v, out / f"train-{shape}-{k}.csv") for k, v in parts.items()}
    distinct = list(dict.fromkeys(r[k] for r in parts["train"] for k in ("src", "mt", "ref")))
    flops = w.forward_flops(w.token_lengths(encoder, distinct, 256), shape) * (0.3 * 1 + 0.7 * 3)
    ours = {p: sides.ours_training(encoder, data, p, cfg, out / "fit" / p) for p in ("32-true", "bf16-mixed")}
    precisions = ("32", "16-mixed", "bf16-mixed") if cfg.gpu else ("32", "bf16-mixed")  # Lightning: no fp16 AMP on CPU
    peer = {p: attempt(lambda p=p: sides.peer_training(encoder, data, p, cfg)) for p in precisions}
    human = [float(r["score"]) for r in parts["dev"]]
    return {"peer": {k: v for k, v in peer.items() if v}, "ours": ours, "flops": flops, "human": human,
            "peer_name": "unbabel-comet (comet-train)"}  # fmt: skip


def attempt(fn):
    """A peer's timing, or None with the reason printed (a missing peer must not stop the benchmark)."""
    try:
        return fn()
    except (RuntimeError, ImportError, FileNotFoundError, OSError) as e:
        lines = [line for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        print(f"peer skipped: {lines[0][:300]} {lines[-1][:300] if len(lines) > 1 else ''}", flush=True)
        return None


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
    args.batch_sweep = (16, 32) if args.dry_run else sides.BATCH_SWEEP
    return args


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/gpu-bench")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shape, a few rows: checks every path")
    parser.add_argument("--work", nargs="+", default=["scoring", "bertscore", "training"],
                        choices=["scoring", "bertscore", "training"])  # fmt: skip
    parser.add_argument("--shapes", nargs="+", default=None, choices=sorted(w.SHAPES))
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    parser.add_argument("--rows", type=int, default=None, help="rows per scoring and BERTScore run (default per shape)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per figure (their median is reported)")
    parser.add_argument("--warmup", type=int, default=256, help="rows passed through each side before its timers")
    parser.add_argument(
        "--peer-python", default=None, help="python with unbabel-comet (default .venv-comet/bin/python)"
    )
    parser.add_argument("--peer-path", default=None, help="PYTHONPATH for the peer (its transformers 4 stack)")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder (default: carry/tokenizer, else MiniLM's)")
    parser.add_argument(
        "--data", default=None, help="DA ratings CSV (default: the carried sample, else ../shared/data)"
    )
    parser.add_argument("--seed", type=int, default=0)
    return configure(parser.parse_args())


def main() -> None:
    args = parse()
    plan = DRY if args.dry_run else FULL
    out = Path(args.out)
    (out / "fit").mkdir(parents=True, exist_ok=True)
    rate = w.bf16_matmul_rate()
    device = torch.cuda.get_device_name() if args.gpu else f"CPU ({platform.processor() or platform.machine()})"
    meta = {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "device": device,
            "bf16_tflops": rate / 1e12 if rate else None, "rated_bf16_tflops": w.rated_bf16_tflops(device),
            "repeats": args.repeats, "warmup": args.warmup}  # fmt: skip
    print(json.dumps(meta), flush=True)
    source = w.read_rows(Path(args.data))
    table = []
    for shape in args.shapes or plan["shapes"]:
        encoder = w.build_encoder(shape, args.tokenizer, out, args.seed)
        args.train_rows = plan["train_rows"].get(shape, 500)
        for work in args.work:  # work by work, so a failure in one leaves the others measured
            for layout in args.layouts if work != "training" else ("wmt",):
                n = args.rows or plan["rows"].get(shape, 2000)
                rows = w.layout_rows(source, layout, n if work != "training" else args.train_rows * 2)
                table.append(measure(work, shape, layout, encoder, rows, args, out, rate, meta))
                print(json.dumps(table[-1]), flush=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, "rows": table}, indent=1), encoding="utf-8")
    (out / "results.md").write_text(report.markdown(table, meta), encoding="utf-8")
    print(report.markdown(table, meta))


def measure(work: str, shape: str, layout: str, encoder: Path, rows: list[dict], args, out: Path, rate, meta) -> dict:
    try:
        res = {
            "scoring": lambda: scoring(shape, encoder, rows, args, out),
            "bertscore": lambda: bertscore(shape, encoder, rows, args),
            "training": lambda: training(shape, encoder, rows, args, out),
        }[work]()
    except Exception as e:  # noqa: BLE001 (recorded in the results and printed; the run goes on)
        return {"work": work, "shape": shape, "layout": layout, "error": f"{type(e).__name__}: {e}"}
    rated = meta["rated_bf16_tflops"] * 1e12 if meta["rated_bf16_tflops"] else None
    return report.summarise({"bertscore": "BERTScore"}.get(work, work), shape, layout, res, rate, rated)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
