"""unbabel-comet side of the COMET benchmarks; runs ONLY in the separate peer virtual environment.

    .venv-comet/bin/python benchmarks/peers/comet_peer.py train --data train.csv --encoder DIR [--batch 32]
        [--precision 32] [--accelerator gpu]
    .venv-comet/bin/python benchmarks/peers/comet_peer.py predict --data triples.csv --encoder DIR
        --weights comet.safetensors [--batch 64] [--accelerator gpu]
    .venv-comet/bin/python benchmarks/peers/comet_peer.py mbr --data candidates.json --encoder DIR
        --weights comet.safetensors [--batch 64]

Builds COMET's ``RegressionMetric`` with the architecture of lightning-metrics' ``CometEstimator``
(BERT encoder from a local folder, softmax layer mix without layer norm, average pooling, a
[1024, 256] Tanh head) and prints one JSON line: the epoch wall time (train) or the prediction
wall time and scores (predict), or the MBR wall time, utilities and choices of ``comet-mbr``'s own
functions (``build_embeddings``, ``mbr_decoding``; its CLI moves the model to CUDA in half precision,
so the CPU run calls them directly). unbabel-comet pins transformers 4, hence the separate venv.
"""

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["train", "predict", "mbr"])
    parser.add_argument("--data", required=True)
    parser.add_argument("--encoder", required=True)
    parser.add_argument("--weights", default=None)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--precision", default="32")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument(
        "--accelerator", choices=["cpu", "gpu"], default="cpu", help="gpu: one CUDA device (benchmarks/gpu)"
    )
    args = parser.parse_args()
    import pytorch_lightning as pl
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    pl.seed_everything(0)
    if args.accelerator == "gpu":  # CUDA context and cuBLAS start outside the timers, as in the caller's process
        torch.ones(64, 64, device="cuda").matmul(torch.ones(64, 64, device="cuda")).sum().item()
    if args.mode == "train":
        model = build(args.encoder, args.data, args.batch)
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
        start = time.perf_counter()
        trainer.fit(model)
        print(json.dumps({"epoch_seconds": time.perf_counter() - start, "steps": trainer.global_step}))
        return
    import csv

    from safetensors.torch import load_file

    model = build(args.encoder)
    missing, unexpected = model.load_state_dict(load_file(args.weights), strict=False)
    if unexpected or [k for k in missing if not k.startswith(("encoder.model.pooler", "layerwise_attention.dropout_"))]:
        raise SystemExit(f"weights do not fit: missing {missing[:5]}, unexpected {unexpected[:5]}")
    if args.mode == "mbr":
        mbr(model, args.data, args.batch)
        return
    with open(args.data, encoding="utf-8", newline="") as f:
        samples = [{"src": r["src"], "mt": r["mt"], "ref": r["ref"]} for r in csv.DictReader(f)]
    start = time.perf_counter()
    gpus = 1 if args.accelerator == "gpu" else 0
    out = model.predict(samples, batch_size=args.batch, gpus=gpus, accelerator=args.accelerator, progress_bar=False)
    print(json.dumps({"seconds": time.perf_counter() - start, "scores": [float(s) for s in out.scores]}))


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


if __name__ == "__main__":
    main()
