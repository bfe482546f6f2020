"""What every `lightning-metrics` subcommand shares: the sub-parser, column flags, atomic writes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from jsonargparse import ActionConfigFile, ArgumentParser

from lightning_metrics.atomic import write_json
from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.metrics.builtin import builtin_names

log = logging.getLogger("lightning_metrics")


class CurrentStderr(logging.StreamHandler):
    """A log handler that writes to whatever ``sys.stderr`` is at the time of each record (a
    test's capture, a redirected stream), so calling ``main`` again never writes to a closed one."""

    def __init__(self):
        super().__init__()

    @property
    def stream(self):
        import sys

        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


THIRD_PARTY_INFO = (  # loggers whose INFO lines are tips and hardware notes, not our output
    "pytorch_lightning.utilities.rank_zero",
    "lightning_fabric.utilities.rank_zero",
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
    "lightning_fabric.utilities.seed",
    "lightning.fabric.utilities.seed",
)
QUIET_WARNINGS = (DeprecationWarning, FutureWarning, PendingDeprecationWarning)


def quiet_third_party() -> None:
    """Keep other packages' tips, hardware notes ("GPU available: ...") and deprecation warnings out of
    the command's output (``--verbose`` keeps them). Our own warnings and every error still show; so do
    progress bars. Processes started from this one (DDP ranks, loader workers) inherit the filters."""
    import os
    import warnings

    for name in THIRD_PARTY_INFO:
        logging.getLogger(name).setLevel(logging.WARNING)
    for category in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("ignore", message=r".*(deprecated|does not have many workers).*")
    rules = [f"ignore::{c.__name__}" for c in QUIET_WARNINGS]
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), *rules]))
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # load reports of unused weights; read at its import


def _subparser(description: str) -> ArgumentParser:
    parser = ArgumentParser(description=description, exit_on_error=False)  # main() prints one line, not the usage
    parser.add_argument("--config", action=ActionConfigFile, help="YAML/JSON file with any of these options")
    return parser


def _add_column_flags(parser: ArgumentParser) -> None:
    group = parser.add_argument_group("columns", "map the file's column names onto src, mt, ref, score, system, doc_id")
    for field in ("src", "mt", "ref", "score", "system", "doc_id"):
        group.add_argument(f"--{field.replace('_', '-')}-col", type=str, default=field, help=f"column holding {field}")
    parser.add_argument(
        "--on-invalid",
        choices=["error", "skip"],
        default="error",
        help="stop at the first bad row, or skip bad rows and report them",
    )


SPEC_HELP = (
    f"a metric spec: a built-in NAME[:key=value,...] ({', '.join(builtin_names())}; e.g. "
    "bertscore:model=default,layer=4,idf=true), an exported metric folder, or LABEL=SPEC"
)
MAX_LENGTH_HELP = (
    "tokens per sequence for exported metrics (default: the length the metric was trained with, else 512, "
    "or the encoder's limit when smaller); longer rows are counted and truncated"
)
BATCH_HELP = "rows per encoder batch (default 64 on the CPU; on CUDA batches fill a budget of 65,536 padded tokens)"
PRECISION_HELP = (
    "fp32, bf16 (encoder weights in bfloat16) or auto (bf16 on CUDA, fp32 elsewhere); the signature names it"
)


def _add_encoder_flags(parser) -> None:
    """``--batch-size`` and ``--precision``, as every encoder-running subcommand takes them."""
    parser.add_argument("--batch-size", type=Optional[int], default=None, help=BATCH_HELP)
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto", help=PRECISION_HELP)


def _add_device_flag(parser) -> None:
    """``--device``, as every subcommand that runs a model takes it."""
    parser.add_argument(
        "--device", type=str, default="auto", help="auto (CUDA when present, else CPU), cpu, cuda, cuda:1, ..."
    )


def _repeated_list_option(parser, args: list[str]) -> str | None:
    """The error for an option of several values (``-r A B``) given more than once, else None:
    argparse would keep the last occurrence alone and drop the others silently."""
    seen: dict[int, str] = {}
    owners = {flag: id(a) for a in parser._actions if a.nargs in ("+", "*") for flag in a.option_strings}
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in owners:
            if owners[flag] in seen:
                first = seen[owners[flag]]
                return f"{first} given more than once: give all its values after one {first} (e.g. {first} A B)"
            seen[owners[flag]] = flag
    return None


def _config_file_problem(args: list[str]) -> str | None:
    """The one-line error for a ``--config`` file that is missing or not valid YAML (else None), so
    the user sees the file, line and column rather than the parser's usage text."""
    import yaml

    paths = [b for a, b in zip(args, args[1:]) if a == "--config"] + [
        a.split("=", 1)[1] for a in args if a.startswith("--config=")
    ]
    for path in paths:
        if not Path(path).exists() and any(c in path for c in ":{\n"):
            continue  # an inline config string (jsonargparse takes those too)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            return f"{path}: cannot read the config file ({getattr(e, 'strerror', None) or e})"
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
            context = f" ({e.context})" if getattr(e, "context", None) else ""
            return f"{path}: {where}YAML syntax error: {getattr(e, 'problem', None) or e}{context}"
    return None


def _score_options(cfg) -> ScoreOptions:
    """The scoring options of a parsed subcommand (``--batch-size``, ``--device``, ``--devices``,
    ``--quiet``), device checked before any work starts."""
    quiet = getattr(cfg, "quiet", False)
    options = ScoreOptions(
        batch_size=getattr(cfg, "batch_size", None),
        device=getattr(cfg, "device", "auto"),
        devices=getattr(cfg, "devices", 1),
        progress=False if quiet else None,
    )
    return options.on_device()


def _columns(cfg) -> dict:
    return {f: getattr(cfg, f"{f}_col") for f in ("src", "mt", "ref", "score", "system", "doc_id")}


def _write_json(path: str, payload: dict) -> None:
    """Write a report's JSON atomically and log where."""
    write_json(path, payload, allow_nan=True)
    log.info("wrote %s", path)
