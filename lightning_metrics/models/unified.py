"""`UnifiedMetric`: one encoder over the mt joined with its source and/or reference (UniTE, CometKiwi
and XCOMET style), a sentence score and the mt's error spans.

- input: ``segments`` ``[mt, src]`` (reference-free), ``[mt, ref]`` or ``[mt, src, ref]``, joined in one
  sequence (:func:`~lightning_metrics.encoders.segments.encode_segments`);
- the sentence head reads the layer mix, pooled (``readout``; COMET's unified models take the first token);
- the token head tags each mt token OK or one of ``error_labels`` (minor, major, critical) from hidden
  layer ``word_layer`` (the last by default), trained with cross-entropy on the tokens of MQM spans
  (:class:`~lightning_metrics.data.batching.SegmentsCollate`), weighted ``word_weight`` beside the sentence
  loss, with optional ``word_class_weights``; ``error_labels: []`` has no token head (and finds no spans);
- scoring reads each of ``views`` (default: all ``segments`` in one sequence): the score is the
  ``view_weights`` sum of the views' scores, the tag probabilities the ``span_weights`` sum of theirs (COMET
  reads a three-segment model as mt+src, mt+ref and mt+src+ref, weighted 1/6, 1/3, 1/2 for spans);
  training reads all ``segments`` in one sequence;
- spans (``decoding``): ``runs`` makes each run of mt tokens with one error tag a span (character offsets
  into the mt without leading whitespace, the severity, and as confidence the mean probability that its
  tokens are errors);
  ``decoding_threshold`` t marks a token as an error when its error tags' probabilities sum above t
  (COMET's option; default: the most probable tag); ``comet`` decodes as unbabel-comet does, for
  imported models (:func:`decode_comet`), which also cut long rows as COMET does (``truncation: comet``);
  ``span_boundaries: words`` (the default) then extends each span to the whole words it touches and joins
  neighbours of one severity across whitespace (:func:`~lightning_metrics.spans.word_spans`); ``tokens``
  keeps the token spans as decoded (an import's ``--raw-spans``, for parity with unbabel-comet);
- ``xcomet_mqm_weight`` w > 0 gives XCOMET's final score: each view's score capped at 1, weighted, plus
  w times ``(25 - min(25, penalty)) / 25`` with the spans' penalty (minor 1, major 5, critical 10), for
  models scored on XCOMET's 0-1 scale.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from lightning_metrics.encoders.inference import attention_kernels
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models.base import MetricModel
from lightning_metrics.spans import IGNORED_TOKEN, SEVERITIES, SEVERITY_WEIGHTS, runs, word_spans

SEGMENT_FIELDS = ("src", "ref")
DECODINGS = ("runs", "comet")
BOUNDARIES = ("words", "tokens")


def check_segments(segments: Sequence[str], name: str = "model.segments") -> tuple[str, ...]:
    """``segments`` as a tuple: mt first, then src and/or ref, each once."""
    segments = tuple(segments)
    if segments[:1] != ("mt",) or not set(segments[1:]) <= set(SEGMENT_FIELDS) or len(set(segments)) < len(segments):
        raise LightningMetricsError(
            f"{name} must be mt followed by src and/or ref (mt, src | mt, ref | mt, src, ref), got {list(segments)}"
        )
    if len(segments) < 2:
        raise LightningMetricsError(f"{name} joins the mt with src and/or ref, got {list(segments)}")
    return segments


class UnifiedMetric(MetricModel):
    """See the module docstring; other arguments as :class:`MetricModel`."""

    input_format = "segments"

    def __init__(
        self,
        segments: Sequence[str] = ("mt", "src"),
        views: Optional[Sequence[Sequence[str]]] = None,
        view_weights: Optional[Sequence[float]] = None,
        span_weights: Optional[Sequence[float]] = None,
        error_labels: Sequence[str] = SEVERITIES,
        word_layer: Optional[int] = None,
        word_weight: float = 1.0,
        word_class_weights: Optional[Sequence[float]] = None,
        decoding: str = "runs",
        decoding_threshold: Optional[float] = None,
        truncation: str = "longest",
        xcomet_mqm_weight: float = 0.0,
        span_boundaries: str = "words",
        **kwargs,
    ):
        self.inputs = self.train_fields = check_segments(segments)
        self.views = [check_segments(v, "model.views") for v in (views or [self.inputs])]
        if any(not set(v) <= set(self.inputs) for v in self.views):
            raise LightningMetricsError(f"model.views {self.views} read segments beyond model.segments {self.inputs}")
        equal = [1.0 / len(self.views)] * len(self.views)
        self.view_weights, self.span_weights = list(view_weights or equal), list(span_weights or equal)
        if len(self.view_weights) != len(self.views) or len(self.span_weights) != len(self.views):
            raise LightningMetricsError("model.view_weights and model.span_weights need one weight per view")
        self.error_labels = list(error_labels)
        if not set(self.error_labels) <= set(SEVERITIES):
            raise LightningMetricsError(f"model.error_labels must be among {SEVERITIES}, got {self.error_labels}")
        if word_class_weights is not None and len(word_class_weights) != 1 + len(self.error_labels):
            raise LightningMetricsError(
                f"model.word_class_weights needs {1 + len(self.error_labels)} values (OK first)"
            )
        if decoding not in DECODINGS:
            raise LightningMetricsError(f"model.decoding must be one of {DECODINGS}, got {decoding!r}")
        if span_boundaries not in BOUNDARIES:
            raise LightningMetricsError(f"model.span_boundaries must be one of {BOUNDARIES}, got {span_boundaries!r}")
        self.span_boundaries = span_boundaries
        super().__init__(**kwargs)
        self.word_layer = self.n_layers if word_layer is None else int(word_layer)
        if self.error_labels and not 0 <= self.word_layer <= self.n_layers:
            raise LightningMetricsError(f"model.word_layer {word_layer} is outside 0..{self.n_layers}")
        self.word_weight, self.decoding, self.xcomet_mqm_weight = float(word_weight), decoding, float(xcomet_mqm_weight)
        self.truncation = truncation  # how scoring cuts long rows (encode_segments); training cuts the longest
        self.decoding_threshold = decoding_threshold
        weights = torch.tensor(word_class_weights or [1.0] * (1 + len(self.error_labels)), dtype=torch.float32)
        self.register_buffer("word_class_weights", weights, persistent=False)
        self.head = self.make_head(self.hidden_size)
        self.token_head = nn.Linear(self.hidden_size, 1 + len(self.error_labels)) if self.error_labels else None
        self._token_counts: Optional[torch.Tensor] = None  # validation's [hits, predicted, annotated] tags
        self.init_head()

    def forward(self, batch: dict) -> torch.Tensor:
        """Standardised sentence predictions [B, n_targets] of ``batch["inputs"]``; in training and
        validation the token logits stay in ``self.token_logits`` for the loss (scoring reads them from
        :meth:`read_sequence`, keeping nothing, so threads can share the model)."""
        predictions, self.token_logits = self.read_sequence(batch)
        return predictions

    def read_sequence(self, batch: dict) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Standardised sentence predictions [B, n_targets] and the token logits [B, T, 1 + labels]
        (None without a token head) of ``batch["inputs"]``."""
        inputs = self._with_token_types(batch["inputs"], batch.get("mt_offsets"))
        with attention_kernels():
            out = self.encoder(**inputs, output_hidden_states=True)
        logits = self.token_head(out.hidden_states[self.word_layer].float()) if self.token_head is not None else None
        return self.head_output(self.read_out(out, inputs["attention_mask"]), batch), logits

    def _with_token_types(self, inputs: dict, mt_offsets) -> dict:
        """An encoder with token types (BERT) reads type 0 up to the mt's closing separator and 1 after it
        (as COMET feeds it), whether or not its tokenizer lists ``token_type_ids``."""
        if "token_type_ids" in inputs or mt_offsets is None or getattr(self.encoder.config, "type_vocab_size", 1) < 2:
            return inputs
        ids = inputs["input_ids"]
        mt_end = torch.tensor([len(o) + 2 for o in mt_offsets], device=ids.device)
        types = (torch.arange(ids.shape[1], device=ids.device)[None, :] >= mt_end[:, None]).long()
        return {**inputs, "token_type_ids": types}

    def auxiliary_loss(self, batch: dict) -> Optional[torch.Tensor]:
        """``word_weight`` times the token cross-entropy over the mt tokens (a severity beyond the model's
        labels counts as its highest label)."""
        if self.word_weight == 0 or self.token_head is None:
            return None
        labels = batch.get("token_labels")
        if labels is None:
            raise LightningMetricsError(
                "the token head (model.word_weight > 0) trains on error spans: the training data has no spans column "
                "(read MQM annotations, lightning_metrics.data.mqm), or set model.word_weight: 0"
            )
        logits = self.token_logits
        labels = labels.to(logits.device).clamp(max=len(self.error_labels))
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            labels.reshape(-1).masked_fill(labels.reshape(-1) < 0, IGNORED_TOKEN),
            weight=self.word_class_weights.to(logits.device),
            ignore_index=IGNORED_TOKEN,
        )
        self.log("train_tokens", loss, batch_size=len(labels))
        return self.word_weight * loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        """The sentence correlations' rows, and the token head's error tags against the annotated ones."""
        super().validation_step(batch, batch_idx)
        labels = batch.get("token_labels")
        if self.token_head is None or labels is None:
            return
        labels = labels.to(self.token_logits.device)
        annotated = labels > 0
        predicted = (self.token_logits.argmax(dim=-1) > 0) & (labels >= 0)
        counts = torch.stack([(predicted & annotated).sum(), predicted.sum(), annotated.sum()]).double()
        self._token_counts = counts if self._token_counts is None else self._token_counts + counts

    def on_validation_epoch_end(self) -> None:
        """Logs ``val_token_f1`` (mt tokens tagged as errors, severity ignored, over every rank) beside the
        correlations."""
        counts = self._token_counts
        if counts is not None:
            hit, predicted, annotated = self.all_gather(counts).reshape(-1, 3).sum(dim=0).tolist()
            precision, recall = hit / max(predicted, 1), hit / max(annotated, 1)
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            self.log("val_token_f1", f1, sync_dist=False, rank_zero_only=False)
            self._token_counts = None
        super().on_validation_epoch_end()

    def predict_spans(self, batch: dict) -> tuple[torch.Tensor, list[list[dict]]]:
        """Scores [B] and each row's error spans (``start``, ``end``, ``severity``, ``confidence``) over the
        views in ``batch["views"]`` (else ``batch["inputs"]`` alone); ``batch["mt"]`` holds the texts."""
        score, probs = self._read_views(batch, with_tags=True)
        if probs is None:
            return score, [[] for _ in batch["mt_offsets"]]
        tags = error_tags(probs, self.decoding_threshold)
        if self.decoding == "comet":
            spans = [decode_comet(probs[i], tags[i], o, self.error_labels) for i, o in enumerate(batch["raw_offsets"])]
        else:
            spans = [
                decode_runs(probs[i, 1:], tags[i, 1:], o, self.error_labels) for i, o in enumerate(batch["mt_offsets"])
            ]
        if self.xcomet_mqm_weight > 0:
            penalty = torch.tensor([min(25.0, sum(SEVERITY_WEIGHTS[s["severity"]] for s in row)) for row in spans])
            score = score + self.xcomet_mqm_weight * ((25.0 - penalty) / 25.0).to(score)
        if self.span_boundaries == "words":  # after XCOMET's penalty, which counts the token spans as COMET does
            spans = [word_spans(row, text) for row, text in zip(spans, batch["mt"])]
        return score, spans

    def _read_views(self, batch: dict, with_tags: bool) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The views' weighted score [B], and (``with_tags``, for a model with a token head) their weighted
        tag probabilities over the mt and its special tokens [B, n, 1 + labels], on the CPU."""
        views = batch.get("views") or [batch["inputs"]]
        view_weights, span_weights = (self.view_weights, self.span_weights) if len(views) > 1 else ([1.0], [1.0])
        scores, probs = [], None
        n_mt = max((len(o) for o in batch["mt_offsets"]), default=0) + 2  # the mt and its special tokens
        for inputs, w_score, w_span in zip(views, view_weights, span_weights):
            standardised, logits = self.read_sequence({**batch, "inputs": inputs})
            scores.append(w_score * self._capped(self.scores_from(standardised)))
            if with_tags and logits is not None:
                p = torch.softmax(logits.float(), dim=-1)[:, :n_mt].cpu() * w_span
                probs = p if probs is None else probs + p
        return torch.stack(scores).sum(dim=0), probs

    def _capped(self, scores: torch.Tensor) -> torch.Tensor:
        """XCOMET caps each view's regression score at 1 before mixing in the span score."""
        return scores.clamp(max=1.0) if self.xcomet_mqm_weight > 0 else scores

    def predict_scores(self, batch: dict) -> torch.Tensor:
        """Scores [B]; the spans are decoded only where the score reads them (XCOMET's mix)."""
        if self.xcomet_mqm_weight > 0:
            return self.predict_spans(batch)[0]
        return self._read_views(batch, with_tags=False)[0]


def error_tags(probs: torch.Tensor, threshold: Optional[float] = None) -> torch.Tensor:
    """Each token's tag from its probabilities [..., 1 + labels]: the most probable; with a ``threshold``
    (COMET's ``decoding_threshold``), an error when the error tags' probabilities sum above it, then the
    most probable error tag."""
    if threshold is None:
        return probs.argmax(dim=-1)
    error = probs[..., 1:].sum(dim=-1) > threshold
    return torch.where(error, probs[..., 1:].argmax(dim=-1) + 1, torch.zeros_like(error, dtype=torch.long))


def decode_runs(
    probs: torch.Tensor, tags: torch.Tensor, offsets: Sequence[tuple[int, int]], labels: Sequence[str]
) -> list[dict]:
    """Character spans from mt tokens' tag probabilities [>= n, 1 + labels], tags and ``offsets``: runs of
    tokens with the same error tag become one span, its confidence the mean probability that its tokens
    are errors (1 - P(OK))."""
    spans = []
    for i, j, tag in runs(tags[: len(offsets)].tolist()):
        start, end = offsets[i][0], offsets[j - 1][1]
        if tag and end > start:
            confidence = float((1 - probs[i:j, 0]).mean())  # the chance its tokens are wrong at all
            spans.append({"start": int(start), "end": int(end), "severity": labels[tag - 1], "confidence": confidence})
    return spans


def decode_comet(
    probs: torch.Tensor, tags: torch.Tensor, raw_offsets: Sequence[tuple[int, int]], labels: Sequence[str]
) -> list[dict]:
    """unbabel-comet's decoding (``UnifiedMetric.decode``), for imported models: over the mt's tokens with
    its two special tokens (offsets (0, 0)), a span opens at a token tagged with an error (the most
    probable tag), takes that tag's severity, runs through every following error-tagged token whatever
    its severity, and closes at the next OK token (a span still open after the last token is dropped);
    its confidence is the mean of its tokens' top probabilities."""
    offsets = [(0, 0), *raw_offsets, (0, 0)]
    tags = tags[: len(offsets)]
    top = torch.where(tags > 0, probs[: len(offsets), 1:].max(dim=-1).values, probs[: len(offsets), 0])
    spans, span = [], None
    for (start, end), p, tag in zip(offsets, top.tolist(), tags.tolist()):
        if tag and span is None:
            span = {"start": start, "end": end, "severity": labels[tag - 1], "scores": [p]}
        elif tag:
            span["end"] = end
            span["scores"].append(p)
        elif span is not None:
            scores = span.pop("scores")
            spans.append({**span, "confidence": float(torch.tensor(scores).mean())})
            span = None
    return spans
