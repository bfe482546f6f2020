"""unbabel-comet side of the COMET benchmarks; runs ONLY in the separate peer virtual environment.

    .venv-comet/bin/python benchmarks/peers/comet_peer.py train --data train.csv --encoder DIR [--batch 32]
        [--precision 32] [--accelerator gpu] [--tf32] [--warmup-data W.csv] [--repeats 1] [--dev dev.csv]
    .venv-comet/bin/python benchmarks/peers/comet_peer.py predict --data triples.csv --encoder DIR
        --weights comet.safetensors [--batch 64 | --batches 16,32,64,128,256] [--accelerator gpu]
        [--half] [--tf32] [--cache] [--per-system] [--warmup 256] [--repeats 1]
    .venv-comet/bin/python benchmarks/peers/comet_peer.py mbr --data candidates.json --encoder DIR
        --weights comet.safetensors [--batch 64]

Builds COMET's ``RegressionMetric`` with the architecture of lightning-metrics' ``CometEstimator``
(BERT encoder from a local folder, softmax layer mix without layer norm, average pooling, a
[1024, 256] Tanh head) and prints one JSON line.

``predict`` can run as ``comet-score`` runs it (``comet/cli/score.py``): ``--half`` (``model.half()``,
on any device, as there), ``--tf32`` (``torch.set_float32_matmul_precision('high')``), ``--cache`` (its
sentence-embedding cache), ``--per-system`` (one ``predict`` call per value of the ``system`` column, in
file order, as it scores each system), length batching on. The model is loaded outside the timers;
``--warmup N`` first scores N rows through the same ``predict`` (the cache is cleared after it and
before every timed pass); ``--batches`` times one pass per batch size and then ``--repeats`` passes at
the fastest. ``train`` times ``--repeats`` epochs of fresh models (seeded alike) after a warm-up fit on
``--warmup-data``; ``--dev`` scores a file after the last one, for the quality check. ``mbr`` runs
``comet-mbr``'s own functions (``build_embeddings``, ``mbr_decoding``). unbabel-comet pins transformers
4, hence the separate venv.
"""

import argparse
import csv
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def build(encoder: str, train: str | None = None, batch: int = 32):
    from comet.models import RegressionMetric

    return RegressionMetric(
        encoder_model="BERT",
        pretrained_model=encoder,
        local_files_only=True,
        layer="mix",
        layer_transformation="softmax",
        layer_norm=False,
        pool="avg",
        hidden_sizes=[1024, 256],
        activations="Tanh",
        dropout=0.1,
        batch_size=batch,
        nr_frozen_epochs=0.3,
        keep_embeddings_frozen=True,
        encoder_learning_rate=3e-5,
        learning_rate=3e-4,
        layerwise_decay=0.9,
        train_data=[train] if train else [],
        validation_data=[train] if train else [],
    )


def read_rows(path: str) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def predict_pass(model, rows: list[dict], batch: int, args) -> list[float]:
    """One scoring of ``rows``: per system (as comet-score scores each system) or in one call."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.get("system", "all") if args.per_system else "all", []).append(row)
    scores: dict[int, float] = {}
    gpus = 1 if args.accelerator == "gpu" else 0
    for group in groups.values():
        samples = [{"src": r["src"], "mt": r["mt"], "ref": r["ref"]} for r in group]
        out = model.predict(
            samples, batch_size=batch, gpus=gpus, accelerator=args.accelerator, progress_bar=False, length_batching=True
        )
        scores.update({id(r): float(s) for r, s in zip(group, out.scores)})
    return [scores[id(r)] for r in rows]


def timed_pass(model, rows: list[dict], batch: int, args) -> tuple[float, list[float]]:
    if args.cache:
        model.retrieve_sentence_embedding.cache_clear()  # each timed pass starts cold, as a comet-score run does
    synchronize()
    start = time.perf_counter()
    scores = predict_pass(model, rows, batch, args)
    synchronize()
    return time.perf_counter() - start, scores


def run_predict(args) -> None:
    from safetensors.torch import load_file

    model = build(args.encoder)
    missing, unexpected = model.load_state_dict(load_file(args.weights), strict=False)
    if unexpected or [k for k in missing if not k.startswith(("encoder.model.pooler", "layerwise_attention.dropout_"))]:
        raise SystemExit(f"weights do not fit: missing {missing[:5]}, unexpected {unexpected[:5]}")
    if args.mode == "mbr":
        mbr(model, args.data, args.batch)
        return
    model.eval()
    if args.half:  # as comet-score, on any device
        model.half()
    if args.cache:
        model.set_embedding_cache()
    rows = read_rows(args.data)
    batches = [int(b) for b in args.batches.split(",")] if args.batches else [args.batch]
    if args.warmup:
        predict_pass(model, rows[: args.warmup], batches[0], args)
    sweep = {b: timed_pass(model, rows, b, args)[0] for b in batches} if len(batches) > 1 else {}
    best = min(sweep, key=sweep.get) if sweep else batches[0]
    runs, scores = [], None
    for _ in range(args.repeats):
        seconds, scores = timed_pass(model, rows, best, args)
        runs.append(seconds)
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    median = sorted(runs)[len(runs) // 2]
    print(
        json.dumps({"seconds": median, "runs": runs, "batch": best, "sweep": sweep, "dtype": dtype, "scores": scores})
    )


def run_train(args) -> None:
    import pytorch_lightning as pl

    def fit(data: str) -> tuple[float, object, int]:
        pl.seed_everything(0, verbose=False)
        model = build(args.encoder, data, args.batch)
        trainer = pl.Trainer(
            max_epochs=1,
            accelerator=args.accelerator,
            devices=1,
            precision=args.precision,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            num_sanity_val_steps=0,
        )
        synchronize()
        start = time.perf_counter()  # after the model and the trainer are built, as on our side
        trainer.fit(model)
        synchronize()
        return time.perf_counter() - start, model, trainer.global_step

    if args.warmup_data:
        fit(args.warmup_data)
    runs, model, steps = [], None, 0
    for _ in range(args.repeats):
        seconds, model, steps = fit(args.data)
        runs.append(seconds)
    out = {"runs": runs, "epoch_seconds": runs[0], "steps": steps}
    if args.dev:
        dev = [{k: r[k] for k in ("src", "mt", "ref")} for r in read_rows(args.dev)]
        gpus = 1 if args.accelerator == "gpu" else 0
        out["dev_scores"] = [float(s) for s in model.predict(dev, batch_size=64, gpus=gpus, progress_bar=False).scores]
    print(json.dumps(out))


def mbr(model, data: str, batch: int) -> None:
    """comet-mbr on CPU: {"src": [...], "candidates": [[...] per source]} -> time, utilities, chosen indices."""
    import torch
    from comet.cli.mbr import build_embeddings, mbr_decoding

    with open(data, encoding="utf-8") as f:
        task = json.load(f)
    sources, groups = task["src"], task["candidates"]
    n = len(groups[0])
    model.eval()
    start = time.perf_counter()
    src_embeddings, mt_embeddings = build_embeddings(sources, [c for g in groups for c in g], model, batch)
    matrix = mbr_decoding(src_embeddings, mt_embeddings.reshape(len(sources), n, -1), model)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "utility": matrix.tolist(), "chosen": torch.argmax(matrix, dim=1).tolist()}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["train", "predict", "mbr"])
    parser.add_argument("--data", required=True)
    parser.add_argument("--encoder", required=True)
    parser.add_argument("--weights", default=None)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--batches", default=None, help="predict: comma-separated batch sizes to sweep")
    parser.add_argument("--precision", default="32")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--accelerator", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--half", action="store_true", help="predict: model.half(), as comet-score")
    parser.add_argument("--tf32", action="store_true", help="TF32 matrix products, as comet-score and comet-train")
    parser.add_argument("--cache", action="store_true", help="predict: comet's sentence-embedding cache")
    parser.add_argument("--per-system", action="store_true", help="predict: one call per system, as comet-score")
    parser.add_argument("--warmup", type=int, default=0, help="predict: rows scored before the timers")
    parser.add_argument("--warmup-data", default=None, help="train: a file fitted once before the timers")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--dev", default=None, help="train: score this file after the last fit")
    args = parser.parse_args()
    import pytorch_lightning as pl
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tf32:
        torch.set_float32_matmul_precision("high")
    pl.seed_everything(0, verbose=False)
    if args.mode == "train":
        run_train(args)
    else:
        run_predict(args)


if __name__ == "__main__":
    main()
