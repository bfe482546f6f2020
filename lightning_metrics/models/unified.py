"""`UnifiedMetric`: one encoder over the mt joined with its source and/or reference (UniTE, CometKiwi
and XCOMET style), a sentence score and the mt's error spans.

- input: ``[CLS] mt [SEP] src [SEP]`` (``segments: [mt, src]``, reference-free), ``[mt, ref]`` or
  ``[mt, src, ref]`` (:func:`~lightning_metrics.encoders.sequences.encode_segments`);
- the sentence head reads the layer mix, pooled (``readout``), like every family;
- the token head tags each mt token OK / minor / major / critical from hidden layer ``word_layer``
  (the last by default), trained with cross-entropy on the tokens of MQM spans
  (:class:`~lightning_metrics.data.batching.SegmentsCollate`), weighted ``word_weight`` beside the
  regression loss, with optional ``word_class_weights`` (the tags are mostly OK);
- at inference, consecutive mt tokens with the same error tag become one span: character offsets
  into the mt, the severity, and the mean probability of that tag as its confidence;
- ``span_score_weight`` w > 0 gives XCOMET's final score: ``(1 - w) * regression + w * mqm``, where
  ``mqm`` is minus the MQM weight of the predicted spans (minor 1, major 5, critical 10), the scale of
  the MQM scores :mod:`~lightning_metrics.data.mqm` reads. Use it only with targets on that scale.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from lightning_metrics.data.batching import IGNORED_TOKEN
from lightning_metrics.data.mqm import SEVERITIES, WEIGHTS
from lightning_metrics.encoders.inference import attention_kernels
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models.base import MetricModel

TAGS = ("ok", *SEVERITIES)
SEGMENT_FIELDS = ("src", "ref")


class UnifiedMetric(MetricModel):
    """See the module docstring; other arguments as :class:`MetricModel`."""

    input_format = "segments"

    def __init__(
        self,
        segments: Sequence[str] = ("mt", "src"),
        word_layer: Optional[int] = None,
        word_weight: float = 1.0,
        word_class_weights: Optional[Sequence[float]] = None,
        span_score_weight: float = 0.0,
        **kwargs,
    ):
        segments = tuple(segments)
        if (
            segments[:1] != ("mt",)
            or not set(segments[1:]) <= set(SEGMENT_FIELDS)
            or len(set(segments)) < len(segments)
        ):
            raise LightningMetricsError(
                f"model.segments must be mt followed by src and/or ref (mt, src | mt, ref | mt, src, ref), got "
                f"{list(segments)}"
            )
        if word_class_weights is not None and len(word_class_weights) != len(TAGS):
            raise LightningMetricsError(f"model.word_class_weights needs {len(TAGS)} values {TAGS}")
        if not 0.0 <= span_score_weight <= 1.0:
            raise LightningMetricsError(f"model.span_score_weight must be in [0, 1], got {span_score_weight}")
        self.inputs = self.train_fields = segments
        super().__init__(**kwargs)
        self.word_layer = self.n_layers if word_layer is None else int(word_layer)
        if not 0 <= self.word_layer <= self.n_layers:
            raise LightningMetricsError(f"model.word_layer {word_layer} is outside 0..{self.n_layers}")
        self.word_weight, self.span_score_weight = float(word_weight), float(span_score_weight)
        weights = torch.tensor(word_class_weights or [1.0] * len(TAGS), dtype=torch.float32)
        self.register_buffer("word_class_weights", weights, persistent=False)
        self.head = self.make_head(self.hidden_size)
        self.token_head = nn.Linear(self.hidden_size, len(TAGS))
        self.init_head()

    def forward(self, batch: dict) -> torch.Tensor:
        """Standardised sentence predictions [B, n_targets]; the token logits [B, T, 4] of the batch are
        left in ``self.token_logits`` for the loss and the spans."""
        inputs = batch["inputs"]
        with attention_kernels():
            out = self.encoder(**inputs, output_hidden_states=True)
        self.token_logits = self.token_head(out.hidden_states[self.word_layer].float())
        return self.head_output(self.read_out(out, inputs["attention_mask"]), batch)

    def auxiliary_loss(self, batch: dict) -> Optional[torch.Tensor]:
        """``word_weight`` times the token cross-entropy over the mt tokens."""
        if self.word_weight == 0:
            return None
        labels = batch.get("token_labels")
        if labels is None:
            raise LightningMetricsError(
                "the token head (model.word_weight > 0) trains on error spans: the training data has no spans column "
                "(read MQM annotations, lightning_metrics.data.mqm), or set model.word_weight: 0"
            )
        logits = self.token_logits
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            labels.reshape(-1).to(logits.device),
            weight=self.word_class_weights.to(logits.device),
            ignore_index=IGNORED_TOKEN,
        )
        self.log("train_tokens", loss, batch_size=len(labels))
        return self.word_weight * loss

    def predict_spans(self, batch: dict) -> tuple[torch.Tensor, list[list[dict]]]:
        """Scores [B] and each row's error spans (``start``, ``end``, ``severity``, ``confidence``)."""
        scores = self.scores_from(self(batch))
        probs = torch.softmax(self.token_logits.float(), dim=-1).cpu()
        spans = [decode_spans(probs[i, 1 : 1 + len(o)], o) for i, o in enumerate(batch["mt_offsets"])]
        if self.span_score_weight > 0:
            mqm = torch.tensor([-sum(WEIGHTS[s["severity"]] for s in row) for row in spans], device=scores.device)
            scores = (1 - self.span_score_weight) * scores + self.span_score_weight * mqm.to(scores.dtype)
        return scores, spans

    def predict_scores(self, batch: dict) -> torch.Tensor:
        return self.predict_spans(batch)[0]


def decode_spans(probs: torch.Tensor, offsets: Sequence[tuple[int, int]]) -> list[dict]:
    """Character spans from mt tokens' tag probabilities [n, 4] and character offsets: runs of tokens
    with the same error tag (the most probable) become one span, its confidence that tag's mean probability."""
    tags = probs.argmax(dim=-1).tolist()
    spans, i = [], 0
    while i < len(tags):
        j = i + 1
        while j < len(tags) and tags[j] == tags[i]:
            j += 1
        start, end = offsets[i][0], offsets[j - 1][1]
        if tags[i] and end > start:
            confidence = float(probs[i:j, tags[i]].mean())
            spans.append({"start": int(start), "end": int(end), "severity": TAGS[tags[i]], "confidence": confidence})
        i = j
    return spans
