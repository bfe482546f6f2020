"""The peers' side of benchmarks/import_parity.py; runs ONLY in the peer venv (make peer-venv, which
also installs bleurt-pytorch).

    .venv-comet/bin/python benchmarks/peers/import_peer.py comet --encoder DIR --rows rows.json --out DIR
        --hparams '{"class": "regression_metric", ...}' [--steps 4]
    .venv-comet/bin/python benchmarks/peers/import_peer.py bleurt --encoder DIR --rows rows.json --out DIR
        [--hparams '{"embedding_size": 16}'] [--steps 4]

comet: builds the COMET class with the given hyper-parameters on a BERT encoder folder, trains it
with its own ``fit`` for a few steps on the rows (a word-level unified model cannot train on a CPU in
COMET: its tagger is drawn at random instead), writes the checkpoint in COMET's layout
(``OUT/checkpoints/model.ckpt`` and ``OUT/hparams.yaml``), loads it back with
``comet.load_from_checkpoint`` and prints one JSON line with ``predict``'s scores on the rows (and the
error spans of a word-level model).
bleurt: builds ``BleurtForSequenceClassification`` from the encoder (its BERT weights, a new
pooler and classifier; with ``embedding_size``, narrower new embeddings and their projection, the
layout of BLEURT-20), trains a few AdamW steps on the rows (bleurt-pytorch has no trainer), saves
it with ``save_pretrained`` beside the encoder's vocabulary, loads it back and prints the scores.
"""

import argparse
import csv
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

BLEURT_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
    "pad_token_id",
)
COMET_CLASSES = {
    "regression_metric": "RegressionMetric",
    "referenceless_regression_metric": "ReferencelessRegression",
    "ranking_metric": "RankingMetric",
    "unified_metric": "UnifiedMetric",
    "xcomet_metric": "XCOMETMetric",
}


def write_training_csv(rows: list[dict], path: str, ranking: bool) -> str:
    fields = ["src", "pos", "neg", "ref"] if ranking else ["src", "mt", "ref", "score"]
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for i, r in enumerate(rows):
            if ranking:
                worse = rows[(i + 1) % len(rows)]["mt"]
                writer.writerow({"src": r["src"], "pos": r["mt"], "neg": worse, "ref": r["ref"]})
            else:
                writer.writerow({k: r[k] for k in fields})
    return path


def comet(args, rows: list[dict]) -> dict:
    import comet.models as cm
    import pytorch_lightning as pl
    from pytorch_lightning.core.saving import save_hparams_to_yaml

    hparams = json.loads(args.hparams)
    identifier = hparams.pop("class")
    ranking = identifier == "ranking_metric"
    data = write_training_csv(rows, os.path.join(args.out, "train.csv"), ranking)
    model = getattr(cm, COMET_CLASSES[identifier])(
        encoder_model="BERT",
        pretrained_model=args.encoder,
        local_files_only=True,
        train_data=[data],
        validation_data=[data],
        batch_size=4,
        nr_frozen_epochs=0.0,
        keep_embeddings_frozen=False,
        **hparams,
    )
    trainer = pl.Trainer(
        max_steps=args.steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    os.makedirs(os.path.join(args.out, "checkpoints"), exist_ok=True)
    checkpoint = os.path.join(args.out, "checkpoints", "model.ckpt")
    if getattr(model, "word_level", False):
        # COMET's word-level loss moves its targets to CUDA (compute_loss: .cuda()): it cannot train on a
        # CPU. The model is COMET's own, built by its class, with its tagger drawn at random (seeded) so
        # that spans appear; it is saved and loaded back through COMET's own checkpoint code.
        import torch

        torch.nn.init.normal_(model.hidden2tag.weight, std=2.0)
        hyper = {"hyper_parameters": dict(model.hparams), "pytorch-lightning_version": pl.__version__}
        torch.save({"state_dict": model.state_dict(), **hyper}, checkpoint)
    else:
        trainer.fit(model)
        trainer.save_checkpoint(checkpoint, weights_only=True)
    save_hparams_to_yaml(os.path.join(args.out, "hparams.yaml"), dict(model.hparams))
    loaded = cm.load_from_checkpoint(checkpoint, local_files_only=True)
    samples = [{"src": r["src"], "mt": r["mt"], "ref": r["ref"]} for r in rows]
    prediction = loaded.predict(samples, batch_size=8, gpus=0, progress_bar=False)
    spans = prediction.metadata.get("error_spans") if "metadata" in prediction else None
    keep = ("start", "end", "severity", "confidence")
    return {
        "scores": [float(s) for s in prediction.scores],
        "spans": None if spans is None else [[{k: span[k] for k in keep} for span in row] for row in spans],
    }


def write_vocabulary(rows: list[dict], encoder_dir: str, out: str, sentencepiece: bool):
    """The tokenizer files a port ships, in ``out``, and the tokenizer: the encoder's WordPiece
    ``vocab.txt`` (lower-cased), or a SentencePiece ``spm.model`` trained on the rows (cased, as BLEURT-20)."""
    from bleurt_pytorch.bleurt.tokenization_bleurt_sp import BleurtSPTokenizer
    from transformers import BertTokenizerFast

    if sentencepiece:
        import sentencepiece as spm

        with open(os.path.join(out, "corpus.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(r[k] for r in rows for k in ("mt", "ref")))
        spm.SentencePieceTrainer.train(
            input=os.path.join(out, "corpus.txt"), model_prefix=os.path.join(out, "spm"), vocab_size=300,
            user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"], pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
            pad_piece="[PAD]", unk_piece="[UNK]", minloglevel=2,
        )  # fmt: skip
        for leftover in ("spm.vocab", "corpus.txt"):
            os.remove(os.path.join(out, leftover))
        options = {"do_lower_case": False, "tokenizer_class": "BleurtSPTokenizer"}
        tokenizer = BleurtSPTokenizer(os.path.join(out, "spm.model"))
    else:
        tokenizer = BertTokenizerFast.from_pretrained(encoder_dir)
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("".join(f"{token}\n" for token, _ in vocab))
        options = {"do_lower_case": True, "tokenizer_class": "BleurtTokenizer"}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(options, f)
    return tokenizer


def bleurt(args, rows: list[dict]) -> list[float]:
    import torch
    from bleurt_pytorch import BleurtConfig, BleurtForSequenceClassification, BleurtTokenizer
    from transformers import BertModel

    options = json.loads(args.hparams)
    encoder = BertModel.from_pretrained(args.encoder)
    tokenizer = write_vocabulary(rows, args.encoder, args.out, bool(options.get("spm")))
    shape = {k: getattr(encoder.config, k) for k in BLEURT_KEYS} | {"vocab_size": len(tokenizer)}
    embedding_size = options.get("embedding_size")  # narrower: BLEURT-20's RemBERT layout
    config = BleurtConfig(**shape, embedding_size=embedding_size, tie_word_embeddings=False)
    model = BleurtForSequenceClassification(config)  # seeded: a new pooler and classifier
    if embedding_size is None and not options.get("spm"):
        model.bleurt.embeddings.load_state_dict(encoder.embeddings.state_dict(), strict=False)
    model.bleurt.encoder.load_state_dict(encoder.encoder.state_dict(), strict=embedding_size is None)
    limit = {"truncation": True, "max_length": encoder.config.max_position_embeddings}
    batch = tokenizer([r["ref"] for r in rows], [r["mt"] for r in rows], padding=True, return_tensors="pt", **limit)
    target = torch.tensor([float(r["score"]) for r in rows])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(args.steps):
        loss = torch.nn.functional.mse_loss(model(**batch).logits.squeeze(1), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(args.out, safe_serialization=False)  # pytorch_model.bin, as the published ports
    loaded = BleurtForSequenceClassification.from_pretrained(args.out).eval()
    tok = BleurtTokenizer.from_pretrained(args.out)
    with torch.no_grad():
        enc = tok([r["ref"] for r in rows], [r["mt"] for r in rows], padding="longest", return_tensors="pt", **limit)
        return loaded(**enc).logits.flatten().tolist()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=["comet", "bleurt"])
    parser.add_argument("--encoder", required=True)
    parser.add_argument("--rows", required=True, help="JSON list of {src, mt, ref, score}")
    parser.add_argument("--out", required=True)
    parser.add_argument("--hparams", default="{}")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import pytorch_lightning as pl
    import torch

    torch.set_num_threads(2)
    pl.seed_everything(args.seed, verbose=False)
    os.makedirs(args.out, exist_ok=True)
    with open(args.rows, encoding="utf-8") as f:
        rows = json.load(f)
    print(json.dumps(comet(args, rows) if args.peer == "comet" else {"scores": bleurt(args, rows)}))


if __name__ == "__main__":
    main()
