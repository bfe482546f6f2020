"""`lightning-metrics fit | validate | test --config ...`: LightningCLI over our models and data.

Every run starts from the shared trainer defaults, :data:`TRAINER_DEFAULTS` (checkpoints and
early stopping on ``val_kendall``, clipping, validation twice an epoch, a progress bar); a config
states what differs, and an explicit setting wins over a default callback it contradicts
(:func:`contradicts`). Unless a config names its loggers, the run logs to CSV and W&B under
``trainer.default_root_dir``; W&B stays offline unless ``WANDB_MODE`` says otherwise. Precision
defaults to :func:`~lightning_metrics.encoders.inference.training_precision` (``trainer.precision:
null``), and ``ddp``/``ddp_spawn`` become their ``find_unused_parameters_true`` variants while
``optim.nr_frozen_epochs`` freezes the encoder. The data module's ``encoder``, ``targets`` and
``signals``, and its batch ``layout``, are linked from the model's, so a config states them once
(a value given for the data is replaced by the model's). An error of ours raised while the model
or the data module is built is its one line.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from pytorch_lightning.callbacks import LearningRateMonitor, ModelCheckpoint, ProgressBar
from pytorch_lightning.cli import LightningCLI

from lightning_metrics.data.base import MetricDataModule
from lightning_metrics.encoders.inference import native_cpu_bf16, training_precision
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models.base import MetricModel
from lightning_metrics.training.config_checks import check_training_config
from lightning_metrics.training.resume import AtomicCheckpointIO, check_resume_checkpoint

TRAINER_DEFAULTS = Path(__file__).parents[1] / "resources" / "trainer.yaml"
LINKED = ("encoder", "targets", "signals")  # model.init_args.X -> data.init_args.X


class MetricsCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        for key in LINKED:
            parser.link_arguments(f"model.init_args.{key}", f"data.init_args.{key}")
        # the batch layout is the model's: known once it is built
        parser.link_arguments("model.batch_layout", "data.init_args.layout", apply_on="instantiate")

    def instantiate_classes(self) -> None:
        """As LightningCLI's, but an error of ours raised while a model or data module is built (an
        encoder that is not there, starting weights that do not fit) is its one line, not
        jsonargparse's dump of the whole config around it."""
        try:
            super().instantiate_classes()
        except Exception as e:  # noqa: BLE001 - searched for our own error, re-raised otherwise
            ours = _our_error(e)
            if ours is None:
                raise
            raise ours from None

    def _instantiate_trainer(self, config: dict, callbacks: list):
        if not config.get("plugins"):  # checkpoints written atomically (lightning_metrics.training.resume)
            config["plugins"] = [AtomicCheckpointIO()]
        if config.get("logger") in (None, True):
            config["logger"] = default_loggers(config.get("default_root_dir") or os.getcwd())
        config["callbacks"] = [c for c in config.get("callbacks") or [] if not contradicts(c, config)]
        return super()._instantiate_trainer(config, callbacks)

    def _parse_ckpt_path(self) -> None:
        # before LightningCLI reads the checkpoint (a traceback when damaged) and lets its hyper-parameters
        # replace the config's model (silently, even another model family)
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt_path:
            model = self.config[subcommand].get("model")
            args = model.get("init_args") if model is not None else None
            args = args.as_dict() if hasattr(args, "as_dict") else dict(args or {})
            check_resume_checkpoint(
                str(ckpt_path), model.class_path if subcommand == "fit" else None, args if subcommand == "fit" else {}
            )
        super()._parse_ckpt_path()

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        trainer = config.trainer
        if trainer.get("precision") is None:
            trainer.precision = training_precision(str(trainer.get("accelerator") or "auto"))
        _warn_slow_cpu_bf16(trainer)
        files = [str(p) for p in (config.get("config") or [])]
        check_training_config(config, ", ".join(files) if files else "the command line")
        optim = config.model.init_args.get("optim") if config.get("model") else None
        frozen = float(optim.get("nr_frozen_epochs") or 0) if optim is not None else 0.0
        if frozen > 0 and trainer.get("strategy") in ("ddp", "ddp_spawn"):
            # a frozen encoder yields no gradients for a while: DDP must be told to expect that
            trainer.strategy = f"{trainer.strategy}_find_unused_parameters_true"
        loggers = trainer.get("logger")
        for logger in loggers if isinstance(loggers, list) else [loggers]:
            if getattr(logger, "class_path", "").endswith("WandbLogger"):
                logger.init_args.offline = os.environ.get("WANDB_MODE", "offline") != "online"


def _our_error(error: BaseException) -> LightningMetricsError | None:
    """The first :class:`LightningMetricsError` in ``error``'s chain of causes, else None."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, LightningMetricsError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def contradicts(callback, trainer: dict) -> bool:
    """Whether a callback of the shared defaults contradicts an explicit trainer setting, which wins:
    ``enable_checkpointing: false`` drops ModelCheckpoint, ``enable_progress_bar: false`` the progress
    bar, and ``logger: false`` the learning-rate monitor (it needs a logger). Lightning would raise
    on each of these pairs."""
    if trainer.get("enable_checkpointing") is False and isinstance(callback, ModelCheckpoint):
        return True
    if trainer.get("enable_progress_bar") is False and isinstance(callback, ProgressBar):
        return True
    return trainer.get("logger") in (False, [], ()) and isinstance(callback, LearningRateMonitor)


def default_loggers(root: str) -> list:
    """CSV and W&B (offline unless ``WANDB_MODE=online``) in ``root``."""
    from pytorch_lightning.loggers import CSVLogger, WandbLogger

    online = os.environ.get("WANDB_MODE", "offline") == "online"
    return [CSVLogger(save_dir=root), WandbLogger(save_dir=root, project="lightning-metrics", offline=not online)]


def _warn_slow_cpu_bf16(trainer) -> None:
    """bf16 autocast on a CPU without native bf16 (AVX512-BF16 or AMX) is emulated: a MiniLM
    training step took 16x as long as in fp32 on a 2-core EPYC. Say so before hours are spent."""
    precision, accelerator = str(trainer.get("precision")), str(trainer.get("accelerator") or "auto")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    if on_cpu and precision.startswith("bf16") and not native_cpu_bf16():
        import warnings

        warnings.warn(
            f"trainer.precision {precision} on a CPU without native bf16 (no AVX512-BF16 or AMX) is emulated and much "
            "slower than 32-true (16x for a MiniLM step measured here); leave trainer.precision null for the "
            "right default",
            stacklevel=2,
        )


def run_lightning(argv: list[str] | None) -> int:
    """Run a LightningCLI subcommand (``fit``, ``validate``, ``test``); ``argv=None`` reads ``sys.argv``."""
    import warnings

    # an encoder that never trains is in eval mode on purpose (MetricModel.train); Lightning warns of it
    warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode at the start of training")
    defaults = {"default_config_files": [str(TRAINER_DEFAULTS)]}
    MetricsCLI(
        MetricModel,
        MetricDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        args=argv,
        save_config_kwargs={"overwrite": True},
        seed_everything_default=0,
        parser_kwargs={"fit": defaults, "validate": defaults, "test": defaults},
    )
    return 0
