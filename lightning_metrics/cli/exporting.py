"""The commands that write metric folders: ``export`` (a checkpoint, or an ensemble), ``import`` (a
peer's checkpoint) and ``interpolate`` (two exports' weights mixed)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from jsonargparse import ArgumentParser

from lightning_metrics.cli.common import _add_device_flag, _score_options, _subparser
from lightning_metrics.encoders.template import MODES_HELP
from lightning_metrics.errors import LightningMetricsError


def _export_parser() -> ArgumentParser:
    p = _subparser("Export a trained checkpoint as a self-contained metric folder, or several metrics as one ensemble.")
    p.add_argument("checkpoint", type=Optional[str], nargs="?", help="a Lightning .ckpt from fit (not with --ensemble)")
    p.add_argument("--out", type=str, required=True, help="target folder, e.g. checkpoints/my-metric")
    p.add_argument("--force", type=bool, default=False, help="replace an existing folder")
    p.add_argument(
        "--ensemble",
        type=str,
        nargs="+",
        default=None,
        help="instead of a checkpoint: the metric specs to average, exported folders (LABEL=FOLDER to label "
        "one) and/or built-ins with their options (bertscore:model=multilingual-e5-small,layer=7)",
    )
    p.add_argument(
        "--data", type=Optional[str], default=None, help="with --ensemble: ratings whose rows standardise each member"
    )
    p.add_argument(
        "--weights", type=float, nargs="+", default=None, help="with --ensemble: one weight per member (default equal)"
    )
    p.add_argument(
        "--max-rows",
        type=int,
        default=5000,
        help="with --ensemble: rows of --data used for the statistics (seeded sample)",
    )
    p.add_argument("--seed", type=int, default=0)
    _add_device_flag(p)
    return p


def run_export(cfg) -> int:
    from lightning_metrics.training.export import export_checkpoint

    if cfg.ensemble:
        from lightning_metrics.metrics.ensemble_export import export_ensemble

        if cfg.checkpoint is not None or cfg.data is None:
            raise LightningMetricsError(
                "export --ensemble A B ... takes no checkpoint, and needs --data RATINGS to standardise the members"
            )
        folder = export_ensemble(
            cfg.ensemble, cfg.out, cfg.data, cfg.weights, cfg.force, cfg.max_rows, cfg.seed, _score_options(cfg)
        )
        print(f"exported ensemble of {', '.join(cfg.ensemble)} -> {folder}")
        return 0
    if cfg.checkpoint is None:
        raise LightningMetricsError("export needs a checkpoint (or --ensemble A B ... --data RATINGS)")
    if not Path(cfg.checkpoint).is_file():
        raise LightningMetricsError(f"{cfg.checkpoint}: checkpoint file not found")
    folder = export_checkpoint(cfg.checkpoint, cfg.out, force=cfg.force)
    print(f"exported {cfg.checkpoint} -> {folder}")
    return 0


def _import_parser() -> ArgumentParser:
    p = _subparser("Turn a peer's checkpoint (unbabel-comet, bleurt-pytorch, MetricX) into an exported metric folder.")
    p.add_argument(
        "source",
        type=str,
        help="a COMET checkpoint folder (checkpoints/model.ckpt + hparams.yaml) or its .ckpt, "
        "a bleurt-pytorch folder, or a MetricX-23/24 folder",
    )
    p.add_argument("--out", type=str, required=True, help="the export folder to write (e.g. checkpoints/NAME)")
    p.add_argument(
        "--encoder",
        type=Optional[str],
        default=None,
        help="COMET: a folder with the encoder's config.json and tokenizer, instead of the hub name "
        "in hparams.yaml (pretrained_model)",
    )
    p.add_argument(
        "--tokenizer", type=Optional[str], default=None, help="MetricX: mT5's tokenizer folder, unless beside the model"
    )
    p.add_argument(
        "--metricx-version",
        type=Optional[str],
        default=None,
        help="MetricX: 23 or 24 (default: from the folder's name)",
    )
    p.add_argument(
        "--mode", type=Optional[str], default=None, help=f"MetricX's inputs ({MODES_HELP}; default: the first)"
    )
    p.add_argument(
        "--raw-spans",
        action="store_true",
        help="COMET's unified models: report the token spans as unbabel-comet decodes them, not on word boundaries",
    )
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    return p


def run_import(cfg) -> int:
    from lightning_metrics.importers import fine_tune_command, import_metric
    from lightning_metrics.storage.artifact import read_export

    options = {"tokenizer": cfg.tokenizer, "version": cfg.metricx_version, "mode": cfg.mode}
    folder = import_metric(
        cfg.source, cfg.out, encoder=cfg.encoder, force=cfg.force, raw_spans=cfg.raw_spans, **options
    )
    print(f"imported {cfg.source} -> {folder}")
    print(f"fine-tune it on your ratings with:\n  {fine_tune_command(folder, read_export(folder).meta)}")
    return 0


def _interpolate_parser() -> ArgumentParser:
    p = _subparser(
        "Mix two exports of one architecture in weight space, (1 - alpha) x START + alpha x TUNED (WiSE-FT): "
        "keep most of a fine-tune's gain and most of what its start knew."
    )
    p.add_argument("start", type=str, help="the export the fine-tune started from (alpha 0 scores as it)")
    p.add_argument("tuned", type=str, help="the fine-tuned export (alpha 1 scores as it)")
    p.add_argument(
        "--alpha",
        type=Optional[float],
        default=None,
        help="the fine-tune's share; without it, --dev and --general-dev choose it",
    )
    p.add_argument(
        "--dev", type=Optional[str], default=None, help="in-house dev ratings (mt, score, and what the metric reads)"
    )
    p.add_argument(
        "--general-dev", type=Optional[str], default=None, help="general dev ratings: what the start should not forget"
    )
    p.add_argument(
        "--alphas",
        type=float,
        nargs="+",
        default=None,
        help="the grid the rule chooses from (default 0.1 to 0.9 by 0.1)",
    )
    p.add_argument(
        "--tolerance",
        type=Optional[float],
        default=None,
        help="general dev Kendall a mix may lose against START (default 0.005)",
    )
    p.add_argument("--out", type=str, required=True, help="the export folder to write (e.g. checkpoints/NAME)")
    p.add_argument("--force", type=bool, default=False, help="replace an existing folder")
    _add_device_flag(p)
    return p


def run_interpolate(cfg) -> int:
    from lightning_metrics.metrics.interpolation import interpolate_exports

    alpha, record = cfg.alpha, None
    if alpha is None:
        alpha, record = _alpha_on_dev(cfg)
    elif cfg.dev or cfg.general_dev:
        raise LightningMetricsError("--alpha: give either alpha or --dev and --general-dev to choose it, not both")
    folder = interpolate_exports(cfg.start, cfg.tuned, alpha, cfg.out, force=cfg.force, chosen_on=record)
    print(f"interpolated {1 - alpha:g} x {cfg.start} + {alpha:g} x {cfg.tuned} -> {folder}")
    return 0


def _alpha_on_dev(cfg) -> tuple[float, dict]:
    """The dev rule (:mod:`lightning_metrics.evaluation.alpha_rule`): its table printed, its record kept."""
    from lightning_metrics.evaluation.alpha_rule import GRID, TOLERANCE, as_record, choose_alpha, format_steps

    if not (cfg.dev and cfg.general_dev):
        raise LightningMetricsError("--alpha: without it, --dev and --general-dev are both needed to choose it")
    grid, tolerance = tuple(cfg.alphas or GRID), TOLERANCE if cfg.tolerance is None else cfg.tolerance
    chosen, steps = choose_alpha(
        cfg.start, cfg.tuned, cfg.dev, cfg.general_dev, grid, tolerance, options=_score_options(cfg)
    )
    print(format_steps(steps, chosen))
    return chosen.alpha, as_record(chosen, steps, cfg.dev, cfg.general_dev, tolerance)
