"""The `lightning-metrics` command: one entry point, one subcommand per job.

Every subcommand accepts ``--config FILE`` (YAML or JSON, through jsonargparse) as well as flags.
Errors about the user's input print as one line (``error: FILE: row N: problem``), exit code 2.
"""

from __future__ import annotations

import logging
import sys
from argparse import ArgumentError
from typing import Optional

from jsonargparse import ArgumentParser

from lightning_metrics.cli.common import (
    SPEC_HELP,
    CurrentStderr,
    _add_device_flag,
    _add_encoder_flags,
    _config_file_problem,
    _repeated_list_option,
    _score_options,
    _subparser,
    log,
    quiet_third_party,
)
from lightning_metrics.cli.evaluation import _baseline_parser, _evaluate_parser, run_baseline, run_evaluate
from lightning_metrics.cli.exporting import (
    _export_parser,
    _import_parser,
    _interpolate_parser,
    run_export,
    run_import,
    run_interpolate,
)
from lightning_metrics.cli.paths import path_problem
from lightning_metrics.cli.ranges import annotate, range_problem
from lightning_metrics.cli.scoring import (
    _compare_parser,
    _rerank_parser,
    _score_parser,
    run_compare,
    run_rerank,
    run_score,
)
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.parallel import default_num_proc
from lightning_metrics.version import __version__


def _generate_parser() -> ArgumentParser:
    p = _subparser("Turn a corpus into synthetic (reference, perturbed) pairs with signals.")
    p.add_argument(
        "--corpus",
        type=Optional[str],
        default=None,
        help="text file (one sentence per line), table or dataset; default: WordNet's example sentences",
    )
    p.add_argument(
        "--column",
        type=Optional[str],
        default=None,
        help="column of a table corpus (default ref, else text); a src column is kept",
    )
    p.add_argument("--out", type=str, required=True, help="output folder (Parquet shards + JSON summaries)")
    p.add_argument(
        "--recipe",
        type=Optional[str],
        default=None,
        help="recipe YAML (default: the built-in recipe, = configs/data_gen/default.yaml)",
    )
    p.add_argument("--pairs-per-sentence", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--num-proc", type=int, default=default_num_proc(), help="processes for perturbation and lexical signals"
    )
    p.add_argument("--shard", type=Optional[str], default=None, help="i/n: this machine's share of the corpus")
    p.add_argument("--max-sentences", type=Optional[int], default=None, help="use only the first N sentences")
    return p


def run_generate(cfg) -> int:
    from data_gen import pipeline

    path, summary = pipeline.run(
        cfg.corpus,
        cfg.out,
        cfg.recipe,
        cfg.pairs_per_sentence,
        cfg.seed,
        cfg.num_proc,
        cfg.shard,
        cfg.column,
        max_sentences=cfg.max_sentences,
    )
    print(summary)
    return 0


def _probe_parser() -> ArgumentParser:
    p = _subparser("Audit a metric: how often does it score each perturbation below the unchanged reference?")
    p.add_argument("--metric", type=str, required=True, help=SPEC_HELP)
    p.add_argument(
        "--corpus",
        type=Optional[str],
        default=None,
        help="sentences: a text file or a table column (default: WordNet's example sentences); "
        "a table with src and ref columns is a parallel corpus",
    )
    p.add_argument(
        "--column", type=Optional[str], default=None, help="column of a table corpus (default ref, else text)"
    )
    p.add_argument(
        "--sources",
        type=Optional[str],
        default=None,
        help="a source file, one line per corpus sentence (for metrics that read sources)",
    )
    p.add_argument("--n", type=int, default=300, help="sentences per perturbation")
    p.add_argument("--seed", type=int, default=0)
    _add_encoder_flags(p)
    _add_device_flag(p)
    return p


def run_probe(cfg) -> int:
    from data_gen.probe import format_probe, probe
    from lightning_metrics.data.readers import read_corpus_with_sources
    from lightning_metrics.metrics import load_metric

    options = _score_options(cfg).replace(progress=False)
    metric = load_metric(cfg.metric, precision=cfg.precision)
    if cfg.corpus is None:
        from data_gen.wordnet import example_sentences

        corpus, sources = example_sentences(), None
        if cfg.sources is not None:
            raise LightningMetricsError("--sources needs the --corpus its lines belong to")
    else:
        corpus, sources = read_corpus_with_sources(cfg.corpus, column=cfg.column, sources=cfg.sources, unique=False)
    if metric.needs_src and sources is None:
        raise LightningMetricsError(
            f"{cfg.metric} reads sources: give --sources FILE (a line per corpus sentence) "
            "or a parallel --corpus table with src and ref columns"
        )
    rows = probe(
        lambda mt, ref, src=None: metric.score(mt=mt, ref=ref, src=src, options=options).scores,
        corpus,
        n_sentences=cfg.n,
        seed=cfg.seed,
        sources=sources if metric.needs_src else None,
    )
    print(format_probe(rows, cfg.metric))
    return 0


def _quickstart_parser() -> ArgumentParser:
    from dataclasses import fields

    from lightning_metrics.cli.quickstart import QuickstartSettings

    p = _subparser("Run the main job on the embedded defaults: generate, pre-train, export, score, probe.")
    p.add_argument("--out", type=str, default="runs/quickstart", help="folder for data, logs and training checkpoints")
    p.add_argument(
        "--checkpoints", type=str, default="checkpoints", help="where the exported metric goes (<dir>/quickstart)"
    )
    p.add_argument(
        "--ratings",
        type=Optional[str],
        default=None,
        help="also fine-tune on these human ratings and evaluate on held-out documents",
    )
    p.add_argument("--seed", type=int, default=0)
    for f in fields(QuickstartSettings):
        p.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return p


def run_quickstart(cfg) -> int:
    from dataclasses import fields

    import lightning_metrics.cli.quickstart as quickstart

    settings = quickstart.QuickstartSettings(
        **{f.name: getattr(cfg, f.name) for f in fields(quickstart.QuickstartSettings)}
    )
    quickstart.run(out=cfg.out, checkpoints=cfg.checkpoints, ratings=cfg.ratings, settings=settings, seed=cfg.seed)
    return 0


def _plot_run_parser() -> ArgumentParser:
    p = _subparser("Draw training curves (loss, validation correlations, learning rates) from a run's CSV logs.")
    p.add_argument("run_dir", type=str, help="a training run folder (every metrics.csv below it is drawn)")
    p.add_argument(
        "--out", type=Optional[str], default=None, help="folder for the PNGs (default: beside each metrics.csv)"
    )
    return p


def run_plot_run(cfg) -> int:
    from lightning_metrics.evaluation.plots import training_curves

    for path in training_curves(cfg.run_dir, cfg.out):
        print(path)
    return 0


COMMANDS = {
    "evaluate": (_evaluate_parser, run_evaluate, "correlate metrics with human ratings"),
    "bertscore-baseline": (_baseline_parser, run_baseline, "compute a BERTScore rescaling baseline for any encoder"),
    "generate": (_generate_parser, run_generate, "make synthetic training pairs from a corpus"),
    "score": (_score_parser, run_score, "score system outputs with a metric"),
    "rerank": (_rerank_parser, run_rerank, "choose the best of N candidates per source (QE or minimum Bayes risk)"),
    "compare": (
        _compare_parser,
        run_compare,
        "test whether one system is better than another (paired bootstrap, t-test)",
    ),
    "export": (_export_parser, run_export, "export a trained checkpoint as a self-contained metric folder"),
    "import": (_import_parser, run_import, "import a COMET or BLEURT checkpoint as an exported metric folder"),
    "interpolate": (
        _interpolate_parser,
        run_interpolate,
        "mix the weights of two exports of one architecture (a start and its fine-tune)",
    ),
    "probe": (_probe_parser, run_probe, "audit a metric for blind spots, per perturbation"),
    "quickstart": (_quickstart_parser, run_quickstart, "run the main job on the embedded defaults"),
    "plot-run": (_plot_run_parser, run_plot_run, "draw training curves from a run's CSV logs"),
}


LIGHTNING_COMMANDS = ("fit", "validate", "test")


def build_parser(commands: dict | None = None) -> ArgumentParser:
    """The ``lightning-metrics`` parser; ``commands`` (name -> sub-parser) are built here when not given."""
    commands = commands or {name: make() for name, (make, _, _) in COMMANDS.items()}
    parser = ArgumentParser(
        prog="lightning-metrics",
        description="Train learned text-generation metrics and score with them.",
        exit_on_error=False,
    )
    parser.add_argument("--version", action="version", version=f"lightning-metrics {__version__}")
    parser.epilog = (
        "Training: lightning-metrics fit|validate|test --config CONFIG.yaml (LightningCLI; see --help there). "
        "Every command takes --verbose: other packages' tips and deprecation warnings are shown too."
    )
    sub = parser.add_subcommands(dest="command")
    for name, (_, _, help_text) in COMMANDS.items():
        annotate(commands[name], name)
        sub.add_subcommand(name, commands[name], help=help_text)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``lightning-metrics`` command; ``argv=None`` reads ``sys.argv``. Returns the exit code:
    0, or 2 with one line on stderr for a problem with what was given."""
    _log_to_stderr()
    from_shell = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--verbose" in argv:  # any position: other packages' tips and deprecation warnings stay
        argv = [a for a in argv if a != "--verbose"]
    else:
        quiet_third_party()
    try:
        problem = _config_file_problem(argv)
        if problem:
            raise LightningMetricsError(problem)
        if argv and argv[0] in LIGHTNING_COMMANDS:
            return _train(argv, from_shell)
        return _run_subcommand(argv)
    except LightningMetricsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _log_to_stderr() -> None:
    """Our log records (warnings that count truncated rows, skipped rows, ...) as ``LEVEL: message``."""
    if not any(isinstance(h, CurrentStderr) for h in log.handlers):
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _train(argv: list[str], from_shell: bool) -> int:
    """``fit``, ``validate`` or ``test`` through LightningCLI, after the checks it does not make."""
    from lightning_metrics.training.config_checks import moved_key_problem
    from lightning_metrics.training.lightning_cli import run_lightning

    moved = moved_key_problem(argv)
    if moved:
        raise LightningMetricsError(moved)
    if from_shell:  # LightningCLI reads sys.argv itself (given both, it warns)
        sys.argv[1:] = argv
    return run_lightning(None if from_shell else argv)


def _run_subcommand(argv: list[str]) -> int:
    """Parse one of :data:`COMMANDS`, check its ranges and paths, and run it."""
    commands = {name: make() for name, (make, _, _) in COMMANDS.items()}  # built once: checked here, then parsed with
    if argv and argv[0] in COMMANDS:
        repeated = _repeated_list_option(commands[argv[0]], argv[1:])
        if repeated:
            raise LightningMetricsError(f"{argv[0]}: {repeated}")
    try:
        cfg = build_parser(commands).parse_args(argv)
    except ArgumentError as e:  # one line naming the option; --help lists them all
        command = argv[0] if argv and argv[0] in COMMANDS else ""
        where = f"{command}: " if command else ""
        text = f"{where}{' '.join(str(e).split())} (lightning-metrics {command} --help lists the options)"
        raise LightningMetricsError(text.replace("  ", " ")) from None
    options = getattr(cfg, cfg.command)
    problem = range_problem(cfg.command, options) or path_problem(cfg.command, options)
    if problem:
        raise LightningMetricsError(f"{cfg.command}: {problem}")
    _, run, _ = COMMANDS[cfg.command]
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
