"""A tiny MetricX as Hugging Face holds one: a random mT5 with mT5's 250,112-entry vocabulary saved with
``architectures: [MT5ForRegression]``, and beside it (as ``google/mt5-*`` is beside the real ones) a
tiny sentencepiece tokenizer trained here. The score's row of the head is fitted so that scores spread
inside (0, 25) instead of sitting on the clamp."""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch
from conftest import TINY_CORPUS

SCORE_ID = 250089


def build_tokenizer(folder: Path) -> Path:
    import sentencepiece as spm
    from transformers import T5Tokenizer

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TINY_CORPUS * 5), model_writer=model, vocab_size=100, model_type="unigram",
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0, minloglevel=2,
    )  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spiece.model").write_bytes(model.getvalue())
    T5Tokenizer.from_pretrained(str(folder), extra_ids=0).save_pretrained(str(folder))
    return folder


def build_metricx(folder: Path, tokenizer: Path, tied: bool = False, dtype=torch.float32, seed: int = 0) -> Path:
    """A random mT5 saved as a MetricX checkpoint: safetensors with ``shared``, ``encoder``, ``decoder`` and,
    unless ``tied``, its own ``lm_head.weight``; ``config.json`` with ``MT5ForRegression`` and
    ``tie_word_embeddings`` as given (transformers 5 ties every mT5 it builds; the file says what MetricX does)."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, MT5Config, MT5Model

    torch.manual_seed(seed)
    config = MT5Config(
        vocab_size=250112, d_model=32, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, dropout_rate=0.0,
    )  # fmt: skip
    model = MT5Model(config).eval()
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    texts = fitting_texts()
    with torch.no_grad():  # scores spread over 5-20 on MetricX-like inputs: the score's row fitted by least squares
        parts = []
        for cut in (None, 30):  # whole, and cut as a short max_length cuts
            batch = tok(texts, padding=True, truncation=cut is not None, max_length=cut, return_tensors="pt")
            start = torch.zeros((len(texts), 1), dtype=torch.long)
            parts.append(model(**batch, decoder_input_ids=start).last_hidden_state[:, 0])
        hidden = torch.cat(parts) * (config.d_model**-0.5 if tied else 1)
        wanted = torch.linspace(5.0, 20.0, len(hidden))[torch.randperm(len(hidden))]
        row = torch.linalg.lstsq(hidden, wanted[:, None]).solution[:, 0]
        state = {k: v.clone() for k, v in model.state_dict().items() if "embed_tokens" not in k}
        head = state["shared.weight"] if tied else torch.randn_like(state["shared.weight"]) * 0.05
        head[SCORE_ID] = row
        if not tied:
            state["lm_head.weight"] = head
    folder.mkdir(parents=True, exist_ok=True)
    weights = {k: v.to(dtype).contiguous() for k, v in state.items()}
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})  # as transformers saves it
    saved = {**config.to_dict(), "architectures": ["MT5ForRegression"], "tie_word_embeddings": tied}
    (folder / "config.json").write_text(json.dumps(saved, indent=2, default=str))
    return folder


def fitting_texts() -> list[str]:
    """Inputs in MetricX's templates over pairs of the corpus: where the fitted scores should spread."""
    out = []
    for a, b in zip(TINY_CORPUS, TINY_CORPUS[1:] + TINY_CORPUS[:1]):
        out += [f"source: {a} candidate: {b} reference: {a}", f"source:  candidate: {b} reference: {a}"]
        out += [f"source: {a} candidate: {b}", f"candidate: {b} reference: {a}", f"candidate: {b} source: {a}"]
    return out


def independent_scores(folder: Path, tokenizer: Path, texts: list[str], max_length: int) -> list[float]:
    """MetricX's score from transformers' own mT5: tokenised to ``max_length``, end of sequence removed, one
    decoder step from token 0, logit 250089, clamped to [0, 25]. A tied checkpoint runs
    MT5ForConditionalGeneration (its logits times d_model ** -0.5, as MetricX scales a tied head's input);
    an untied one MT5Model with the file's own head row (transformers 5 ties every MT5ForConditionalGeneration)."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, MT5ForConditionalGeneration, MT5Model

    tied = json.loads((folder / "config.json").read_text())["tie_word_embeddings"]
    cls = MT5ForConditionalGeneration if tied else MT5Model
    model = cls.from_pretrained(str(folder), dtype=torch.float32).eval()
    row = None if tied else load_file(str(folder / "model.safetensors"))["lm_head.weight"][SCORE_ID].float()
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    out = []
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([tok(text, max_length=max_length, truncation=True)["input_ids"][:-1]])
            result = model(input_ids=ids, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long))
            # MetricX scales a tied head's input by d_model ** -0.5 (transformers 5's mT5 no longer does)
            logit = (
                result.logits[0, 0, SCORE_ID] * model.config.d_model**-0.5
                if tied
                else result.last_hidden_state[0, 0] @ row
            )
            out.append(float(torch.clamp(logit, 0, 25)))
    return out
