"""What passes between a data module and a metric model in a Trainer run, one way each.

The model and the data module never read each other. Settings both need are given to both:
``fit`` links the model's ``encoder``, ``targets``, signals and batch layout into the data
module's arguments (:mod:`lightning_metrics.training.lightning_cli`); a Python user passes
``layout=model.batch_layout`` to the data module. At fit time :class:`DataLink`, which every metric
model installs (``configure_callbacks``), checks that the two agree and hands the training
data's statistics, group names and summary to the model and its checkpoints.
"""

from __future__ import annotations

from pytorch_lightning.callbacks import Callback

from lightning_metrics.errors import LightningMetricsError


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
    return None


class DataLink(Callback):
    """Checks the model against the data module, then gives the model the training data's target
    and signal statistics (``fit``) and language-pair names, and each checkpoint the data summary
    (for the exported model card)."""

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

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        data = trainer.datamodule
        if data is not None and hasattr(data, "summary"):
            checkpoint["data_summary"] = data.summary()
