"""The system-level subcommands: `score`, `compare` (significance) and `rerank`."""

from __future__ import annotations

from typing import Optional

from jsonargparse import ArgumentParser

from lightning_metrics.atomic import write_text
from lightning_metrics.cli.common import (
    MAX_LENGTH_HELP,
    SPEC_HELP,
    _add_column_flags,
    _add_device_flag,
    _add_encoder_flags,
    _columns,
    _score_options,
    _subparser,
    _write_json,
)
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.tables import take_rows


def _score_parser() -> ArgumentParser:
    p = _subparser("Score system outputs with a metric, per segment and per system.")
    p.add_argument("--model", type=str, required=True, help=SPEC_HELP)
    p.add_argument(
        "-t", "--translations", type=str, nargs="+", default=None, help="system output files, one segment per line"
    )
    p.add_argument(
        "-r",
        "--references",
        type=str,
        nargs="+",
        default=None,
        help="reference file(s), one segment per line; several: multi-reference scoring",
    )
    p.add_argument("-s", "--sources", type=Optional[str], default=None, help="source file, one segment per line")
    p.add_argument(
        "--data",
        type=Optional[str],
        default=None,
        help="instead of -t/-r/-s: a ratings table or JSONL with mt, ref[, src, system]",
    )
    _add_encoder_flags(p)
    _add_device_flag(p)
    p.add_argument(
        "--devices",
        type=int,
        default=1,
        help="score a learned metric on N devices with Lightning DDP (ddp_spawn); order is kept",
    )
    p.add_argument("--json", type=Optional[str], default=None, help="write segment and system scores to this JSON file")
    p.add_argument(
        "--spans", action="store_true", help="a unified model: print each segment with its error spans marked"
    )
    p.add_argument(
        "--html",
        type=Optional[str],
        default=None,
        help="a unified model: write a page with every segment's error spans highlighted to this file",
    )
    p.add_argument("--quiet", type=bool, default=False, help="print system scores only")
    p.add_argument("--only-system", type=bool, default=False, help="print system scores only (COMET's flag)")
    _add_learned_metric_flags(p)
    _add_column_flags(p)
    return p


def _add_learned_metric_flags(p: ArgumentParser) -> None:
    """``score``'s options that only learned metrics take: references, MC dropout, sequence length."""
    p.add_argument(
        "--multi-ref",
        choices=["max", "mean"],
        default="max",
        help="learned metrics with several references: keep the best score per segment, or the mean",
    )
    p.add_argument(
        "--mc-dropout",
        type=int,
        default=0,
        help="learned metrics: N passes with dropout on; segment means and a std column (N times the cost)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --mc-dropout (and of compare's resampling)")
    p.add_argument(
        "--max-length",
        type=Optional[int],
        default=None,
        help=MAX_LENGTH_HELP,
    )


def _systems_input(cfg, metric, paired: bool = False) -> tuple[dict, dict | list | None, dict | list | None]:
    """Per-system mt, and ref/src (shared lists or per-system dicts), from ``-t/-r/-s`` or ``--data``
    (``paired``: every system must cover the same segments, put in one order)."""
    from lightning_metrics.data.readers import read_parallel_text, read_ratings
    from lightning_metrics.metrics.systems import paired_systems_from_table, systems_from_table

    needs_ref, needs_src = metric.needs_ref, metric.needs_src
    if cfg.data:
        required = ("mt", *(("ref",) if needs_ref else ()), *(("src",) if needs_src else ()))
        data = read_ratings(cfg.data, columns=_columns(cfg), required=required, on_invalid=cfg.on_invalid)
        return (
            paired_systems_from_table(data, cfg.data, getattr(cfg, "lp", None), cfg.system_col)
            if paired
            else systems_from_table(data)
        )
    if not cfg.translations or (needs_ref and not cfg.references):
        raise LightningMetricsError(
            f"{'compare' if paired else 'score'} needs -t SYSTEM_FILE [...]"
            + (" and -r REFERENCE_FILE" if needs_ref else "")
            + ", or --data FILE"
        )
    if needs_src and not cfg.sources:
        raise LightningMetricsError(f"{cfg.model} reads sources: give -s SOURCE_FILE")
    if paired and len(cfg.translations) < 2:
        raise LightningMetricsError(f"-t names {len(cfg.translations)} system file; a comparison needs two or more")
    text = read_parallel_text(cfg.translations, ref=cfg.references, src=cfg.sources, on_invalid=cfg.on_invalid)
    return {str(p): lines for p, lines in zip(cfg.translations, text["mt"])}, text["ref"], text["src"]


def _scoring(cfg) -> dict:
    """What ``score`` and ``compare`` hand to ``metric.score``: the options and the learned-metric flags."""
    return {"options": _score_options(cfg), "mc_dropout": cfg.mc_dropout, "seed": cfg.seed, "multi_ref": cfg.multi_ref}


def run_score(cfg) -> int:
    from lightning_metrics.metrics import load_metric
    from lightning_metrics.metrics.systems import format_scores, score_systems

    scoring = _scoring(cfg)
    metric = load_metric(cfg.model, max_length=cfg.max_length, precision=cfg.precision)
    mt, ref, src = _systems_input(cfg, metric)
    results = score_systems(metric, mt, ref, src, **scoring)
    print(format_scores(results, quiet=cfg.quiet, only_system=cfg.only_system))
    if cfg.spans or cfg.html:
        _show_spans(cfg, results, mt, src)
    if cfg.json:
        _write_json(
            cfg.json,
            {
                "signature": next(iter(results.values())).signature,
                "systems": {
                    k: {
                        "system_score": r.system_score,
                        "scores": r.scores,
                        **{name: r.extra[name] for name in ("std", "spans") if name in r.extra},
                    }
                    for k, r in results.items()
                },
            },
        )
    return 0


def _show_spans(cfg, results: dict, mt: dict, src) -> None:
    """``--spans`` (printed) and ``--html`` (a page): a unified model's error spans."""
    from lightning_metrics.evaluation.span_report import format_spans, html_report

    if any("spans" not in r.extra for r in results.values()):
        raise LightningMetricsError(f"{cfg.model} finds no error spans: --spans and --html need a unified model")
    if cfg.spans:
        print(format_spans(results, mt))
    if cfg.html:
        sources = {n: src.get(n) if isinstance(src, dict) else src for n in mt} if src is not None else None
        write_text(cfg.html, html_report(results, mt, sources, title=f"Error spans: {cfg.model}"))
        print(f"wrote {cfg.html}")


def _compare_parser() -> ArgumentParser:
    p = _score_parser()
    p.description = (
        "Is one system really better than another? Paired bootstrap and paired t-test for every pair of systems."
    )
    p.add_argument("--bootstrap", type=int, default=1000, help="paired bootstrap resamples")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level that decides the winner")
    p.add_argument("--lp", type=Optional[str], default=None, help="with --data: keep only this language pair")
    return p


def run_compare(cfg) -> int:
    from lightning_metrics.evaluation.significance import compare_systems, format_comparisons
    from lightning_metrics.metrics import load_metric
    from lightning_metrics.metrics.systems import score_systems

    scoring = _scoring(cfg)
    metric = load_metric(cfg.model, max_length=cfg.max_length, precision=cfg.precision)
    mt, ref, src = _systems_input(cfg, metric, paired=True)
    results = score_systems(metric, mt, ref, src, **scoring)
    of = lambda value, name: value.get(name) if isinstance(value, dict) else value  # noqa: E731
    columns = {n: metric.columns(mt[n], of(ref, n), of(src, n)) for n in mt}
    pairs = compare_systems(metric, results, columns, cfg.bootstrap, cfg.seed, cfg.alpha)
    print(format_comparisons(pairs, results, cfg.bootstrap, cfg.seed, cfg.alpha))
    if cfg.json:
        _write_json(
            cfg.json,
            {
                "signature": next(iter(results.values())).signature,
                "bootstrap": cfg.bootstrap,
                "seed": cfg.seed,
                "alpha": cfg.alpha,
                "systems": {n: r.system_score for n, r in results.items()},
                "pairs": [p.as_dict() for p in pairs],
            },
        )
    return 0


def _rerank_parser() -> ArgumentParser:
    p = _subparser(
        "Choose the best of N candidates per source: QE with a reference-free metric, or minimum Bayes risk."
    )
    p.add_argument("--model", type=str, required=True, help=SPEC_HELP)
    p.add_argument(
        "-t", "--candidates", type=Optional[str], default=None, help="candidates, N consecutive lines per source"
    )
    p.add_argument("--num-candidates", type=Optional[int], default=None, help="N, with -t")
    p.add_argument("-s", "--sources", type=Optional[str], default=None, help="source file, one line per source")
    p.add_argument(
        "-r",
        "--references",
        type=Optional[str],
        default=None,
        help="reference file: --mode ref scores against it (an oracle)",
    )
    p.add_argument(
        "--data", type=Optional[str], default=None, help="instead of -t: a table with source_id, mt[, src, ref]"
    )
    p.add_argument("--source-id-col", type=str, default="source_id", help="the --data column that groups candidates")
    p.add_argument("--lp", type=Optional[str], default=None, help="with --data: keep only this language pair")
    p.add_argument(
        "--mode",
        type=Optional[str],
        default=None,
        help="qe, mbr or ref (default: qe for reference-free metrics, else mbr; ref with -r)",
    )
    p.add_argument(
        "--out", type=Optional[str], default=None, help="write the chosen candidate per source, one per line"
    )
    p.add_argument("--json", type=Optional[str], default=None, help="write each source's choice (index, text, score)")
    _add_encoder_flags(p)
    _add_device_flag(p)
    p.add_argument("--quiet", type=bool, default=False, help="no progress bars, no per-source lines")
    return p


def run_rerank(cfg) -> int:
    from lightning_metrics.data.readers import read_columns, read_parallel_text, rename_columns
    from lightning_metrics.metrics import load_metric
    from lightning_metrics.metrics.rerank import group_lines, group_table, rerank

    options = _score_options(cfg)
    metric = load_metric(cfg.model, precision=cfg.precision)
    if cfg.data:
        table = read_columns(cfg.data)
        table = rename_columns(cfg.data, table, {cfg.source_id_col: "source_id"})
        if cfg.lp is not None:
            keep = [i for i, x in enumerate(table.get("lp") or []) if x == cfg.lp]
            if not keep:
                raise InputError(cfg.data, f"no rows of language pair {cfg.lp!r}")
            table = take_rows(table, keep)
        candidates, src, ref = group_table(table, cfg.data)
    elif cfg.candidates and cfg.num_candidates:
        candidates = group_lines(read_parallel_text(cfg.candidates)["mt"][0], cfg.num_candidates, cfg.candidates)
        src = read_parallel_text(cfg.sources)["mt"][0] if cfg.sources else None
        ref = read_parallel_text(cfg.references)["mt"][0] if cfg.references else None
        for path, values in ((cfg.sources, src), (cfg.references, ref)):
            if values is not None and len(values) != len(candidates):
                raise InputError(
                    path,
                    f"{len(values)} lines, but {cfg.candidates} holds {len(candidates)} sources of "
                    f"{cfg.num_candidates}",
                )
    else:
        raise LightningMetricsError(
            "rerank needs -t CANDIDATES --num-candidates N, or --data TABLE with a source_id column"
        )
    mbr = cfg.mode == "mbr" or (cfg.mode is None and metric.needs_ref and ref is None)
    if mbr and len(candidates[0]) < 2:
        where = f"column {cfg.source_id_col!r}" if cfg.data else f"--num-candidates {cfg.num_candidates}"
        raise InputError(
            cfg.data or cfg.candidates, f"1 candidate per source ({where}); minimum Bayes risk needs two or more"
        )
    choices = rerank(metric, candidates, src, ref, cfg.mode, options)
    if not cfg.quiet:
        print("\n".join(f"source {c.source}\tcandidate {c.index}\tscore: {c.score:.4f}\t{c.text}" for c in choices))
    if cfg.out:
        write_text(cfg.out, "".join(c.text + "\n" for c in choices))
    if cfg.json:
        _write_json(cfg.json, {"model": cfg.model, "choices": [c.__dict__ for c in choices]})
    print(f"chose among {len(candidates[0])} candidates for {len(choices)} sources with {cfg.model}")
    return 0
