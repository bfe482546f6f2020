"""Encoders: loading any Hugging Face encoder and the embedded defaults (:mod:`.loading`), the
multilingual encoder built offline (:mod:`.e5`), and how an encoder runs when it only infers:
precision, batches, transfers (:mod:`.inference`), tokenised sequences (:mod:`.sequences`)."""

from lightning_metrics.encoders.loading import DEFAULT_ENCODER, load_encoder, load_tokenizer, resolve_encoder

__all__ = ["DEFAULT_ENCODER", "load_encoder", "load_tokenizer", "resolve_encoder"]
