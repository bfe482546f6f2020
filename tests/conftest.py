"""Shared fixtures: a tiny random BERT with a WordPiece tokenizer trained offline, and paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("WANDB_MODE", "offline")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
DA_FILE = SHARED_DATA / "wmt21_da_toen.csv"

TINY_CORPUS = [
    "The cat sat on the mat.",
    "The cat is on the mat.",
    "A quick brown fox jumps over the lazy dog.",
    "The train to Berlin is running twenty minutes late today.",
    "Please close the window before you leave.",
    "The library will be closed on Sunday.",
    "We don't have enough time for a break.",
    "Prices went up five percent this year.",
    "It never rains here in the summer.",
    "She left her umbrella on the bus.",
    "The museum opens at nine o'clock.",
    "A dog ran fast across the green field.",
    "The weather is hot and the soup is cold.",
    "He went to school and she did not go.",
]


def build_tiny_encoder(
    path: Path, corpus: list[str] = TINY_CORPUS, seed: int = 0, hidden: int = 32, layers: int = 2, dropout: float = 0.1
) -> Path:
    """Write a random BERT (``layers`` x ``hidden``, BERT's ``dropout`` on hidden states and attention)
    and a WordPiece tokenizer built from ``corpus`` (same files every run)."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # a WordPiece vocabulary built deterministically (the trainer breaks ties in hash order, so
    # its vocabulary changed from run to run): every corpus word, every character (alone and as
    # a continuation), and the 300 most frequent 2-3 letter pieces, ties broken alphabetically
    from collections import Counter

    normalizer, pre = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = sorted({w for line in corpus for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(line))})
    chars = sorted(set("".join(words)) | set("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"()-"))
    pieces = Counter(
        (w[i : i + n] if i == 0 else f"##{w[i : i + n]}") for w in words for n in (2, 3) for i in range(len(w) - n + 1)
    )
    frequent = [p for p, _ in sorted(pieces.items(), key=lambda kv: (-kv[1], kv[0]))[:300]]
    vocab = list(dict.fromkeys([*special, *chars, *(f"##{c}" for c in chars), *words, *frequent]))
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = normalizer, pre
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        model_max_length=128,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    BertModel(config).save_pretrained(path)
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory) -> Path:
    """Folder of a tiny random BERT and its tokenizer; built once per test session."""
    return build_tiny_encoder(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def da_rows():
    """The first 200 rows of the WMT21 DA file, or a skip when ../shared/data is absent."""
    if not DA_FILE.exists():
        pytest.skip(f"{DA_FILE} is absent; real-data checks need ../shared/data")
    import csv

    with DA_FILE.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        return [row for _, row in zip(range(200), reader)]


@pytest.fixture(scope="session")
def document_rows(da_rows):
    """Whole small is-en documents of the WMT21 DA file, every system's output of each source (about 240 rows)."""
    import csv
    from collections import Counter

    with DA_FILE.open(encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["lp"] == "is-en"]
    docs, total = set(), 0
    for doc, size in sorted(Counter(r["doc_id"] for r in rows).items(), key=lambda kv: (kv[1], kv[0])):
        if total >= 240:
            break
        docs.add(doc)
        total += size
    return [r for r in rows if r["doc_id"] in docs]


def _write_csv(path: Path, rows: list[dict]) -> Path:
    import csv

    with Path(path).open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return Path(path)


@pytest.fixture(scope="session")
def write_csv():
    """``write_csv(path, rows)``: rows (dicts) to a CSV file with a header; returns the path."""
    return _write_csv


def export_tiny(
    model, encoder: Path, data: Path, folder: Path, name: str, steps: int = 1, batch_size: int = 16
) -> Path:
    """``model`` trained ``steps`` steps (one by default: a real, if untrained, metric) of ``batch_size``
    rows on the ratings file ``data`` and exported to ``folder/name``."""
    import pytorch_lightning as pl

    from lightning_metrics.data.modules import RatingsDataModule
    from lightning_metrics.training.export import export_checkpoint

    pl.seed_everything(0)
    trainer = pl.Trainer(
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    trainer.fit(
        model,
        RatingsDataModule(
            train=str(data),
            val=str(data),
            encoder=str(encoder),
            batches={"batch_size": batch_size},
            layout=model.batch_layout,
        ),
    )
    trainer.save_checkpoint(folder / f"{name}.ckpt")
    return export_checkpoint(folder / f"{name}.ckpt", folder / name)
