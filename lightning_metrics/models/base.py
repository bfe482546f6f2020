"""`MetricModel`: what every trainable metric shares.

- the encoder (``encoders.load_encoder``), a :class:`LayerMix` over all hidden layers, pooling
  (the ``readout`` group of :mod:`~lightning_metrics.models.options`, where every group is described);
- AdamW with layer-wise learning-rate decay (top layer ``lr_encoder``, each layer below times
  ``layerwise_decay``, embeddings lowest), a separate ``lr_head``, linear warm-up and decay, the
  encoder frozen for the first ``nr_frozen_epochs`` (fractions allowed), embeddings optionally
  frozen for the whole run, and only the parts ``optim.trainable`` names trained (the ``optim`` group);
- optional LoRA adapters on the encoder, added after the starting weights and merged at export
  (:mod:`lightning_metrics.models.tuning`);
- target standardisation: the statistics are the training data's, handed over at fit time by
  :class:`~lightning_metrics.models.data_link.DataLink` (the model never reads the data module) and
  saved in checkpoints;
- validation that gathers predictions from every rank, drops the duplicates a distributed
  sampler pads with, and logs Kendall/Pearson/Spearman per language pair and averaged, plus
  system-level Pearson when systems are known (:func:`~lightning_metrics.correlation.correlations_by_group`).
  Correct under DDP by construction.

Where the rest lives: starting weights (``init_from``) in :mod:`lightning_metrics.storage.checkpoint`,
signals and source bias in :mod:`lightning_metrics.models.head`, what crosses into spawned
processes in :mod:`lightning_metrics.parallel`.
"""

from __future__ import annotations

import math
import os
from typing import Optional, Sequence

import numpy as np
import pytorch_lightning as pl
import torch

from lightning_metrics.baselines.signals import SignalSpec, signal_spec
from lightning_metrics.correlation import correlations_by_group
from lightning_metrics.encoders.inference import attention_kernels
from lightning_metrics.encoders.loading import load_encoder
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models.data_link import DataLink
from lightning_metrics.models.head import (
    add_source_bias,
    source_bias_table,
    standardised_signals,
    start_as_signal,
    zero_linear,
)
from lightning_metrics.models.losses import objective_weights, pairwise_loss, regression_loss, squared_distance
from lightning_metrics.models.modules import FeedForward, LayerMix, pool
from lightning_metrics.models.options import Adapters, Head, Objective, Optimisation, Readout, as_group, plain
from lightning_metrics.models.tuning import add_adapters, limit_training, optimizer_and_schedule, parameter_groups
from lightning_metrics.parallel import drop_hidden_state_hooks, register_hidden_state_capture
from lightning_metrics.storage.checkpoint import encoder_brings_weights, load_start


class MetricModel(pl.LightningModule):
    """Base class; subclasses define ``forward(batch) -> [B, n_targets]`` (standardised).

    Class attributes say what a model reads: ``inputs`` (the fields scoring needs),
    ``train_fields`` (the text columns of a training batch) and ``input_format``: ``cross``
    (one sequence per row, :class:`CrossEncoderCollate`) or ``sentences`` (each unique
    sentence encoded once, :class:`SentencesCollate`).
    """

    inputs: tuple[str, ...] = ("mt", "ref")
    train_fields: tuple[str, ...] = ("mt", "ref")
    input_format = "cross"
    higher_is_better = True  # MetricX's error scores are lower for better translations

    def __init__(
        self,
        encoder: str = "default",
        targets: Sequence[str] = ("score",),
        readout: Readout = Readout(),
        head: Head = Head(),
        objective: Objective = Objective(),
        optim: Optimisation = Optimisation(),
        adapters: Adapters = Adapters(),
        signals: Optional[SignalSpec] = None,
        init_from: Optional[str] = None,
        encoder_weights: bool = True,
    ):
        """``encoder`` (a name or folder, :mod:`lightning_metrics.encoders`) and ``targets`` (the first is
        the metric's score); the groups of :mod:`~lightning_metrics.models.options` (``readout``, ``head``,
        ``objective``, ``optim``, ``adapters``: each a dataclass or a dict of its fields); ``signals``, the
        hybrid inputs (:class:`~lightning_metrics.baselines.signals.SignalSpec`: names, BERTScore encoder
        and layer) fed to the head beside the embeddings; ``init_from``, starting weights (a checkpoint
        or an export, see :meth:`initialise_from`). ``encoder_weights=False`` builds the encoder from its
        config alone, for code that loads every weight from elsewhere (an export, a peer's checkpoint);
        it is not a hyper-parameter."""
        super().__init__()
        self.readout = as_group(Readout, readout, "model.readout")
        self.head_options = as_group(Head, head, "model.head")
        self.objective = as_group(Objective, objective, "model.objective")
        self.optim = as_group(Optimisation, optim, "model.optim")
        self.adapters = as_group(Adapters, adapters, "model.adapters")
        self.targets = list(targets)
        self.loss_weights = objective_weights(self.objective.loss, self.objective.loss_weights, self.targets)
        self.signal_spec = signal_spec(signals)
        self.save_hyperparameters(ignore=["encoder_weights"])
        self._store_hparams()
        self._build_encoder(encoder_weights)
        self.register_buffer("target_mean", torch.zeros(len(self.targets)))
        self.register_buffer("target_std", torch.ones(len(self.targets)))
        self.register_buffer("stats_ready", torch.tensor(False))
        self._build_signal_inputs()
        self.source_bias = source_bias_table(len(self.targets)) if self.head_options.source_bias else None
        self.group_names: list[str] = []  # language-pair names of the validation ids (from the data, at fit time)
        self._outputs: list[torch.Tensor] = []

    def _store_hparams(self) -> None:
        """The hyper-parameters as checkpoints keep them: every group a plain dict (``weights_only``
        loading reads no dataclasses), signals with the layer resolved, so a checkpoint records it."""
        groups = {"readout": self.readout, "head": self.head_options, "objective": self.objective}
        groups.update(optim=self.optim, adapters=self.adapters, signals=self.signal_spec)
        for store in (self._hparams, self._hparams_initial):
            store.update({k: plain(v) for k, v in groups.items()})
            store["targets"] = list(self.targets)

    def _build_encoder(self, encoder_weights: bool) -> None:
        """The encoder in training mode, without its unused pooler, its layer mix, embeddings frozen if asked."""
        hp, readout = self.hparams, self.readout
        own_weights = encoder_weights and encoder_brings_weights(hp.encoder, hp.init_from)
        self.encoder, _ = load_encoder(hp.encoder, weights=own_weights)
        self.encoder.train()  # from_pretrained returns eval mode; dropout belongs to training
        if getattr(self.encoder, "pooler", None) is not None:
            self.encoder.pooler = None  # unused (we pool hidden states); DDP rejects unused parameters
        self.hidden_size = int(self.encoder.config.hidden_size)
        self.n_layers = int(self.encoder.config.num_hidden_layers)
        self.layer_mix = (
            LayerMix(self.n_layers + 1, readout.mix_dropout, readout.layer_transform, readout.mix_layer_norm)
            if readout.layer_mix
            else None
        )
        if readout.layer is not None and not 0 <= readout.layer <= self.n_layers:
            raise LightningMetricsError(
                f"model.readout.layer {readout.layer} is outside 0..{self.n_layers}, the encoder's layers"
            )
        if self.optim.keep_embeddings_frozen:
            for name, p in self.encoder.named_parameters():
                if name.startswith("embeddings"):
                    p.requires_grad_(False)

    def _build_signal_inputs(self) -> None:
        """A hybrid model's signal statistics and skip layer (:mod:`~lightning_metrics.models.head`)."""
        names = list(self.signal_spec.names) if self.signal_spec is not None else []
        self.n_signals = len(names)
        if self.n_signals:
            self.register_buffer("signal_mean", torch.zeros(self.n_signals))
            self.register_buffer("signal_std", torch.ones(self.n_signals))
            skip = self.head_options.signal_skip
            self.signal_skip = zero_linear(self.n_signals, max(1, len(self.targets))) if skip else None
        start = self.head_options.start_from
        if start is not None and (start not in names or not self.head_options.signal_skip):
            raise LightningMetricsError(
                f"model.head.start_from {start!r} must be one of the model's signals {names}, with signal_skip true"
            )

    def make_head(self, features: int) -> FeedForward:
        """The head over ``features`` values (plus one per signal), one output per target."""
        head = self.head_options
        return FeedForward(
            self.head_width(features),
            head.hidden_sizes,
            out_dim=len(self.targets),
            dropout=head.dropout,
            activation_name=head.activation,
            final_activation=head.final_activation,
        )

    def init_head(self) -> None:
        """Called once a subclass has built ``self.head``: ``start_from`` (the output starts as that
        standardised signal for the first target, the others 0, so at step 0 the metric ranks rows as its
        baseline does), then ``init_from``, whose matching weights replace these."""
        start = self.head_options.start_from
        if start:
            start_as_signal(self.head, self.signal_skip, list(self.signal_spec.names).index(start))
        self.initialise_from(self.hparams.init_from)

    def initialise_from(self, path: Optional[str]) -> None:
        """Start from a Lightning checkpoint of any metric model, or an exported metric folder (``init_from``).

        Weights whose names and shapes match are copied. The last layer of the head is copied
        row by row for the targets both models share, so a pre-trained multi-signal head hands
        its ``score`` row to a fine-tuning head; a hybrid head (``signals``) takes a head pre-trained
        without them, its signal columns keeping their initial values. Target statistics are not
        copied: fine-tuning data brings its own. Reads with ``weights_only=True``: no pickled code runs.
        Then the adapters, if any, and the freezing ``optim.trainable`` asks for: the last step of
        building every family.
        """
        copied = load_start(self, path) if path else {}
        add_adapters(self.encoder, self.adapters)
        self._tunable_encoder = limit_training(self)
        self.train(self.training)  # an encoder that never trains leaves training mode now (see train)
        if self.objective.l2_to_start > 0 and (copied or self.head_options.start_from):
            # the pull's anchor: the weights that may move, as they start (init_from's, or as built: start_from's
            # baseline with a zero correction, the encoder as pre-trained)
            params = dict(self.named_parameters())
            anchor = copied or params
            self._start = {
                k: v.detach().clone().float() for k, v in anchor.items() if k in params and params[k].requires_grad
            }

    @property
    def batch_layout(self) -> dict:
        """What a data module must make for this model: ``input_format`` and ``text_fields``
        (``RatingsDataModule(..., layout=model.batch_layout)``; ``fit`` links it itself)."""
        return {"input_format": self.input_format, "text_fields": tuple(self.train_fields)}

    def set_statistics(self, statistics: dict) -> None:
        """The training data's target (and signal) means and standard deviations, set once: a model
        that already has them (resumed, or loaded from a checkpoint) keeps its own."""
        if bool(self.stats_ready):
            return
        self.target_mean.copy_(torch.tensor(statistics["target_mean"]))
        self.target_std.copy_(torch.tensor(statistics["target_std"]))
        if self.n_signals:
            self.signal_mean.copy_(torch.tensor(statistics["signal_mean"]))
            self.signal_std.copy_(torch.tensor(statistics["signal_std"]))
        self.stats_ready.fill_(True)

    def train(self, mode: bool = True):
        """Lightning's train/eval switch; an encoder that never trains stays in eval mode (no dropout), so
        a frozen fit reads the features a feature cache holds."""
        super().train(mode)
        if mode and getattr(self, "_tunable_encoder", None) == set():
            self.encoder.eval()
        return self

    def configure_callbacks(self):
        return [DataLink()]  # the data's statistics to the model, the model's layout checked against the data's

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["metric_family"] = type(self).__name__  # which class export rebuilds

    def __getstate__(self):
        drop_hidden_state_hooks(self.encoder)  # closures: they would stop ddp_spawn pickling the model
        return super().__getstate__()

    def __setstate__(self, state) -> None:
        super().__setstate__(state)
        register_hidden_state_capture(self.encoder)

    # -- encoding ----------------------------------------------------------------------------
    def embed(self, inputs: dict) -> torch.Tensor:
        """Pooled sentence (or pair) vectors [B, H] from tokenised ``inputs``, in fp32 whatever the
        encoder's dtype (the head's weights are fp32)."""
        layer = self.readout.layer
        with attention_kernels():
            out = self.encoder(**inputs, output_hidden_states=self.layer_mix is not None or layer is not None)
        return self.read_out(out, inputs["attention_mask"])

    def read_out(self, out, attention_mask: torch.Tensor) -> torch.Tensor:
        """Pooled fp32 vectors [B, H] from an encoder's output: the layer mix (or the chosen layer), pooled."""
        layer = self.readout.layer
        if self.layer_mix is not None:
            tokens = self.layer_mix(out.hidden_states, attention_mask)
        else:
            tokens = out.last_hidden_state if layer is None else out.hidden_states[layer]
        return pool(tokens, attention_mask, self.readout.pooling).float()

    def head_output(self, features: torch.Tensor, extras: dict) -> torch.Tensor:
        """Standardised predictions [B, n_targets]: the head over ``features`` (and the standardised
        signals, for a hybrid model), plus the signal skip and the rating source's bias.

        ``extras`` holds ``signals`` [B, k] (needed by hybrid models) and ``source_id`` [B] (else source 0).
        """
        if not self.n_signals:
            return add_source_bias(self.head(features), self.source_bias, extras)
        z = standardised_signals(extras, self.signal_mean, self.signal_std, self.signal_spec.names)
        out = self.head(torch.cat([features, z.to(features.dtype)], dim=1))
        if self.signal_skip is not None:
            out = out + self.signal_skip(z).to(out.dtype)
        return add_source_bias(out, self.source_bias, extras)

    def head_width(self, features: int) -> int:
        """The head's input width: the features plus one per signal."""
        return features + self.n_signals

    def scores_from(self, standardised: torch.Tensor) -> torch.Tensor:
        """The metric's score (first target) on the scale of the training data."""
        return standardised[:, 0].float() * self.target_std[0] + self.target_mean[0]

    def predict_scores(self, batch: dict) -> torch.Tensor:
        """Metric scores [B] for a batch of the model's ``inputs``."""
        return self.scores_from(self(batch))

    def predict_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        """``[index, score]`` rows; used by multi-device scoring (``Trainer.predict``)."""
        return torch.stack([batch["index"].double(), self.predict_scores(batch).double()], dim=1)

    # -- optimisation --------------------------------------------------------------------------
    def parameter_groups(self) -> list[dict]:
        """AdamW groups: layer-wise decayed encoder LRs (embeddings lowest), the head at ``lr_head``."""
        return parameter_groups(self)

    def configure_optimizers(self):
        return optimizer_and_schedule(self, int(self.trainer.estimated_stepping_batches))

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        # reseed torch from (seed, epoch, batch): a resumed run draws the same dropout masks as
        # one that never stopped, whatever else consumed random numbers in between
        seed = int(os.environ.get("PL_GLOBAL_SEED", 0))
        torch.manual_seed((seed * 1_000_003 + self.current_epoch * 100_003 + batch_idx) % 2**63)
        n_batches = self.trainer.num_training_batches
        progress = self.current_epoch + (batch_idx / n_batches if n_batches and math.isfinite(n_batches) else 0.0)
        trainable = progress >= self.optim.nr_frozen_epochs
        if getattr(self, "_encoder_trainable", None) == trainable:
            return  # only a change walks the parameters
        self._encoder_trainable = trainable
        for name, param in self.encoder.named_parameters():
            if name in self._tunable_encoder:
                param.requires_grad_(trainable)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        objective = self.objective
        pred = self(batch).float()
        target = (batch["targets"] - self.target_mean) / self.target_std
        losses = regression_loss(
            pred, target, objective.loss, objective.huber_delta, objective.clip_targets, batch.get("weight")
        )
        loss = sum(w * part for w, part in zip(self.loss_weights, losses))
        if objective.l2_to_start > 0:
            drift = self.distance_to_start()
            self.log("train_l2_to_start", drift, batch_size=len(target))
            loss = loss + objective.l2_to_start * drift
        if objective.pairwise_weight > 0:
            if "group" not in batch:
                raise LightningMetricsError("pairwise_weight needs rows grouped by source (ratings with src or ref)")
            ranking = pairwise_loss(pred[:, 0], target[:, 0], batch["group"], objective.pairwise_margin)
            self.log("train_pairwise", ranking, batch_size=len(target))
            loss = loss + objective.pairwise_weight * ranking
        auxiliary = self.auxiliary_loss(batch)
        if auxiliary is not None:
            loss = loss + auxiliary
        self.log("train_loss", loss, prog_bar=True, batch_size=len(target))
        if len(self.targets) > 1:
            for name, value in zip(self.targets, losses):
                self.log(f"train_mse/{name}", value, batch_size=len(target))
        return loss

    def auxiliary_loss(self, batch: dict) -> Optional[torch.Tensor]:
        """A family's own loss term beside the regression (the unified family's token loss); None here."""
        return None

    def distance_to_start(self) -> torch.Tensor:
        """Squared L2 distance of the weights that may move to their starting values (``init_from``'s, or
        as built for ``start_from``)."""
        if not getattr(self, "_start", None):
            raise LightningMetricsError(
                "model.objective.l2_to_start needs model.init_from or model.head.start_from: there is no start "
                "to pull toward"
            )
        return squared_distance(dict(self.named_parameters()), self._start)

    # -- evaluation ----------------------------------------------------------------------------
    def validation_step(self, batch: dict, batch_idx: int) -> None:
        scores = self.predict_scores(batch) * (1.0 if self.higher_is_better else -1.0)  # agreement with humans
        human = batch["targets"][:, 0].float()
        self._outputs.append(
            torch.stack([batch["index"].float(), scores, human, batch["lp"].float(), batch["system"].float()], dim=1)
        )

    test_step = validation_step

    def on_validation_epoch_end(self) -> None:
        self._log_correlations("val")

    def on_test_epoch_end(self) -> None:
        self._log_correlations("test")

    def gathered_outputs(self) -> np.ndarray:
        """All ranks' ``[index, score, human, lp, system]`` rows, each index once, sorted by index."""
        local = torch.cat(self._outputs) if self._outputs else torch.zeros(0, 5, device=self.device)
        self._outputs.clear()
        everything = self.all_gather(local)
        rows = everything.reshape(-1, 5).double().cpu().numpy()
        _, first = np.unique(rows[:, 0], return_index=True)  # a DistributedSampler pads with repeats
        return rows[first]

    def _log_correlations(self, prefix: str) -> None:
        rows = self.gathered_outputs()
        if len(rows) < 2:
            return
        stats = correlations_by_group(rows, self.group_names)
        for key, value in stats.items():
            self.log(f"{prefix}_{key}", value, prog_bar=key == "kendall", sync_dist=False, rank_zero_only=False)
