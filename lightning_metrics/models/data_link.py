"""What passes between a data module and a metric model in a Trainer run, one way each.

The model and the data module never read each other. Settings both need are given to both:
``fit`` links the model's ``encoder``, ``targets``, signals and batch layout into the data
module's arguments (:mod:`lightning_metrics.training.lightning_cli`); a Python user passes
``layout=model.batch_layout`` to the data module. At fit time :class:`DataLink`, which every metric
model installs (``configure_callbacks``), checks that the two agree and hands the training
data's statistics, group names and summary to the model and its checkpoints.
"""

from __future__ import annotations

import logging
import time

from pytorch_lightning.callbacks import Callback
from tqdm.auto import tqdm

from lightning_metrics.encoders.features import FeatureCache, FeatureTable, cache_key, pooled_layer_features
from lightning_metrics.errors import LightningMetricsError

log = logging.getLogger(__name__)


def link_problem(model, data) -> str | None:
    """Why ``data`` cannot feed ``model`` (settings that differ), else None."""
    family = type(model).__name__
    if getattr(data, "encoder", model.hparams.encoder) != model.hparams.encoder:
        encoders = f"model.encoder is {model.hparams.encoder!r} but data.encoder is {data.encoder!r}"
        return f"{encoders}; set both to the same encoder"
    if list(data.targets) != list(model.targets):
        return f"model.targets {list(model.targets)} differ from data.targets {list(data.targets)}"
    data_signals = getattr(data, "signal_spec", None)
    if (data_signals.resolved() if data_signals else None) != model.signal_spec:
        return (
            f"model signals {model.signal_spec} differ from the data's {data_signals}; set them on the model (linked)"
        )
    layout = model.batch_layout
    if (data.input_format, tuple(data.text_fields)) != (layout["input_format"], layout["text_fields"]):
        return (
            f"{family} reads {layout['input_format']} batches of {list(layout['text_fields'])}, but the data module "
            "makes "
            f"{data.input_format} batches of {list(data.text_fields)}; build it with layout=model.batch_layout"
        )
    if layout.get("template") != getattr(data, "template", None):
        return f"{family} reads the template {layout.get('template')}, the data module makes {data.template}"
    return None


def cached_feature_table(trainer, model, data) -> FeatureTable:
    """The pooled layers of every distinct sentence of the data's fields, from the feature cache
    (:mod:`lightning_metrics.encoders.features`): each process encodes its share of what is missing,
    with the model's encoder where the trainer put it; then, once all are done, each reads the table."""
    max_length, pooling = data.sequence_length(), model.readout.pooling
    texts = data.distinct_texts()
    cache = FeatureCache(cache_key(model.encoder, data.tokenizer, max_length, pooling))
    started, rank, world = time.perf_counter(), trainer.global_rank, trainer.world_size
    share = len(cache.missing(texts)[rank::world])
    with tqdm(total=share, desc="feature cache", unit="sentence", disable=None if share else True) as bar:

        def encode(batch: list[str]):
            return pooled_layer_features(model.encoder, data.tokenizer, batch, max_length, pooling, bar)

        added = cache.build(texts, encode, rank, world)
    log.info(
        "feature cache %s: %d of %d sentences encoded by process %d (%.0f s), the rest read back",
        cache.folder, added, len(texts), rank, time.perf_counter() - started,
    )  # fmt: skip
    trainer.strategy.barrier()
    return cache.table(texts)


class DataLink(Callback):
    """Checks the model against the data module, then gives the model the training data's target
    and signal statistics (``fit``) and language-pair names, the cached features of a fit that reads
    them, and each checkpoint the data summary (for the exported model card)."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        data = trainer.datamodule
        if data is None:
            return
        problem = link_problem(pl_module, data)
        if problem:
            raise LightningMetricsError(problem)
        pl_module.group_names = list(data.lp_names)
        if stage == "fit":
            pl_module.set_statistics(data.statistics())

    def on_fit_start(self, trainer, pl_module) -> None:
        data = trainer.datamodule
        if data is not None and getattr(pl_module, "reads_cached_features", lambda: False)():
            pl_module.feature_table = cached_feature_table(trainer, pl_module, data)

    def on_fit_end(self, trainer, pl_module) -> None:
        if getattr(pl_module, "feature_table", None) is not None:
            pl_module.feature_table = None  # a fit's memory, not the model's

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        data = trainer.datamodule
        if data is not None and hasattr(data, "summary"):
            checkpoint["data_summary"] = data.summary()
