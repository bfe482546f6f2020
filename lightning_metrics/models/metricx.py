"""MetricX (google-research/metricx): an mT5 encoder-decoder run for one decoder step from token 0; the
score is the logit of vocabulary id 250089 (``<extra_id_10>``), the decoder output scaled by
``d_model ** -0.5`` first when the word embeddings are tied, clamped to [0, 25]. Lower is better: it
is an error score on MQM's scale.

Only the score's row of the language-model head is kept (``score_head``): the other 250,111 rows never
reach the score, and a large model's head alone is a billion weights. The input is a text template
over the row (:mod:`lightning_metrics.encoders.template`).

Fine-tuning regresses the quality ``-score`` on the training targets' scale, so targets are human scores
on MQM's scale (0 perfect, -25 the worst; ``ratings.normalise: none``): the clamp keeps a score in
[0, 25]. Validation correlates ``-score`` with the human scores. LoRA adapters go on the attention's
``q, k, v, o`` and the feed-forward's ``wi_0, wi_1, wo``.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from lightning_metrics.encoders.template import template_fields
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models.base import MetricModel
from lightning_metrics.models.options import Adapters, Readout, as_group

SCORE_ID = 250089  # <extra_id_10>
SCORE_RANGE = (0.0, 25.0)
T5_MODULES = ("q", "k", "v", "o", "wi_0", "wi_1", "wo")
TIED_ALIASES = ("encoder.encoder.embed_tokens.weight", "encoder.decoder.embed_tokens.weight")  # = encoder.shared


class MetricXRegressor(MetricModel):
    """MetricX-23 or -24 (``version``) scoring in one ``mode`` (``both``, ``reference`` or ``qe``;
    MetricX-23 has no ``both``); ``tied_embeddings`` as the checkpoint's config.json says (transformers 5 ties
    every mT5 config it reads, so it is kept here); other arguments as :class:`MetricModel`, without a layer
    mix or signals."""

    input_format = "template"
    higher_is_better = False

    def __init__(self, version: str = "24", mode: str = "both", tied_embeddings: bool = False, **kwargs):
        self.version, self.mode, self.tied_embeddings = str(version), mode, bool(tied_embeddings)
        self.inputs = self.train_fields = template_fields(self.version, mode)
        readout = as_group(Readout, kwargs.get("readout"), "model.readout")
        kwargs["readout"] = dataclasses.replace(readout, layer_mix=False)  # the decoder reads the encoder, not a mix
        adapters = as_group(Adapters, kwargs.get("adapters"), "model.adapters")
        if set(adapters.modules) == set(Adapters().modules):  # BERT's names: the T5 layers' instead
            adapters = Adapters(adapters.rank, adapters.alpha, adapters.dropout, T5_MODULES)
        kwargs["adapters"] = adapters
        if kwargs.get("signals"):
            raise LightningMetricsError("model.signals: a MetricX model reads no signals")
        super().__init__(**kwargs)
        config = self.encoder.config
        if getattr(config, "model_type", "") not in ("mt5", "t5") or int(config.vocab_size) <= SCORE_ID:
            raise LightningMetricsError(
                f"model.encoder {self.hparams.encoder}: MetricX needs an mT5 encoder-decoder whose vocabulary holds id "
                f"{SCORE_ID} (it has {config.vocab_size} entries, model type {getattr(config, 'model_type', '?')})"
            )
        self.score_head = nn.Linear(int(config.d_model), 1, bias=False)
        self.initialise_from(self.hparams.init_from)

    def state_dict(self, *args, **kwargs):
        """Without the embedding's tied aliases (one tensor under three names, which safetensors refuses)."""
        state = super().state_dict(*args, **kwargs)
        prefix = kwargs.get("prefix", args[1] if len(args) > 1 else "")
        for name in TIED_ALIASES:
            state.pop(prefix + name, None)
        return state

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        state = dict(state_dict)
        if "encoder.shared.weight" in state:
            for name in TIED_ALIASES:
                state.setdefault(name, state["encoder.shared.weight"])
        return super().load_state_dict(state, strict=strict, assign=assign)

    @property
    def batch_layout(self) -> dict:
        return {**super().batch_layout, "template": f"metricx-{self.version}:{self.mode}"}

    def error_scores(self, inputs: dict) -> torch.Tensor:
        """MetricX's score [B] for tokenised inputs (``input_ids``, ``attention_mask``)."""
        ids = inputs["input_ids"]
        start = torch.zeros((ids.shape[0], 1), dtype=torch.long, device=ids.device)  # one decoder step from token 0
        out = self.encoder(input_ids=ids, attention_mask=inputs["attention_mask"], decoder_input_ids=start)
        hidden = out.last_hidden_state[:, 0].to(self.score_head.weight.dtype)  # fp32 (float64 in parity checks)
        if self.tied_embeddings:
            hidden = hidden * self.encoder.config.d_model**-0.5
        return torch.clamp(self.score_head(hidden)[:, 0], *SCORE_RANGE)

    def forward(self, batch: dict) -> torch.Tensor:
        """The quality ``-score``, standardised with the target statistics: [B, 1]."""
        return ((-self.error_scores(batch["inputs"]) - self.target_mean[0]) / self.target_std[0])[:, None]

    def scores_from(self, standardised: torch.Tensor) -> torch.Tensor:
        """MetricX's score (lower is better) from the standardised quality."""
        return -(standardised[:, 0].float() * self.target_std[0] + self.target_mean[0])
