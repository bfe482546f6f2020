"""What a metric is, and the one place that turns a name into one.

- :mod:`~lightning_metrics.metrics.base`: :class:`Metric`, :class:`ScoreResult`, :class:`Signature`;
- :mod:`~lightning_metrics.metrics.builtin`: BLEU, chrF, ROUGE, BERTScore and their registry;
- :mod:`~lightning_metrics.metrics.learned`: exported metric folders;
- :mod:`~lightning_metrics.metrics.ensemble`: several metrics averaged, as one folder;
- :mod:`~lightning_metrics.metrics.systems`: scoring and printing several systems at once.

Everything that scores (the CLI, ``evaluate``, ``probe``, the benchmarks) asks :func:`load_metric`
or :func:`score_many`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from lightning_metrics.artifact import is_exported, read_export
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.base import Metric, ScoreResult, Signature, resolve_device
from lightning_metrics.metrics.builtin import BUILTIN, builtin, builtin_names, builtin_scores, canonical_name

__all__ = [
    "Metric",
    "ScoreResult",
    "Signature",
    "builtin_names",
    "check_names",
    "is_builtin",
    "load_metric",
    "metric_inputs",
    "score_many",
]


def is_builtin(name: str) -> bool:
    return canonical_name(str(name)) in BUILTIN


def load_metric(name_or_path: str, **options) -> Metric:
    """A metric by exported folder or built-in name.

    Names: ``bleu``, ``chrf``, ``rouge1``/``rouge2``/``rougeL``, ``bertscore`` (= ``bertscore_f``),
    ``bertscore_p``, ``bertscore_r``. ``options`` go to a built-in metric (BLEU: ``tokenize``,
    ``smooth_method``, ``lowercase``; chrF: ``word_order``, ``lowercase``; BERTScore: ``model``,
    ``layer``, ``idf``, ``baseline``, ``precision``). A folder written by ``lightning-metrics export``
    is verified against its manifest and loads with no network; its options are ``max_length``
    (tokens per sequence; default 512 or the encoder's limit when smaller; longer rows are
    truncated with a warning that counts them) and ``precision`` (``fp32``, ``bf16`` or ``auto``:
    bf16 on CUDA, fp32 elsewhere; the signature names the one used). ``max_length=None`` is ignored
    by built-ins, and so is ``precision`` None or ``auto``.
    """
    text = str(name_or_path)
    max_length = options.pop("max_length", None)
    if is_exported(text):
        precision = options.pop("precision", None) or "auto"
        if options:
            raise LightningMetricsError(
                f"{text}: an exported metric takes no options but max_length and precision (got {sorted(options)})"
            )
        from lightning_metrics.metrics.ensemble import FAMILY, Ensemble
        from lightning_metrics.metrics.learned import LearnedMetric

        export = read_export(text)
        if export.family == FAMILY:
            return Ensemble.from_export(export, max_length, precision)
        return LearnedMetric(text, export, max_length, precision)
    if is_builtin(text):
        if options.get("precision", "") in (
            None,
            "auto",
        ):  # auto is every built-in's default; only BERTScore has the option
            options.pop("precision")
        return builtin(text, **options)
    if Path(text).exists():
        read_export(text)  # raises the precise reason (not a folder, no metadata, ...)
    raise LightningMetricsError(
        f"unknown metric {text!r}: not an exported metric folder, nor a built-in metric {builtin_names()}"
    )


def metric_inputs(name_or_path: str) -> tuple[str, ...]:
    """The fields a metric reads, without loading it (built-ins read mt and ref)."""
    text = str(name_or_path)
    if is_exported(text):
        return tuple(read_export(text).meta.get("inputs", ("mt", "ref")))
    return ("mt", "ref")


def check_names(names: Sequence[str]) -> None:
    """Fail early, in one line, on names that are neither built-in metrics nor export folders."""
    unknown = [n for n in names if not is_builtin(n) and not Path(str(n)).exists()]
    if unknown:
        raise LightningMetricsError(
            f"unknown metric(s) {unknown}: not exported metric folders, nor built-in metrics {builtin_names()}"
        )


def score_many(
    names: Sequence[str],
    mt: Sequence[str],
    ref: Sequence[str] | None = None,
    src: Sequence[str] | None = None,
    num_proc: int = 1,
    bertscore: dict | None = None,
    batch_size: int | None = None,
    device: str = "auto",
    progress: bool | None = None,
    max_length: int | None = None,
    precision: str | None = None,
) -> dict[str, list[float]]:
    """Segment scores per metric name (built-in or folder), keys as given.

    Built-in families (ROUGE-1/2/L, BERTScore P/R/F) are computed once. ``num_proc`` processes
    share the lexical metrics; ``bertscore`` holds BERTScore's settings; ``max_length`` goes to
    exported metrics, and ``precision`` (fp32, bf16, auto) to them and to BERTScore.
    """
    check_names(names)
    device = resolve_device(device)
    builtins = [n for n in names if is_builtin(n) and not is_exported(n)]
    bertscore = {"batch_size": batch_size, **({"precision": precision} if precision else {}), **(bertscore or {})}
    out = (
        builtin_scores(builtins, mt, ref, num_proc=num_proc, bertscore=bertscore, device=device, progress=progress)
        if builtins
        else {}
    )
    for name in names:
        if name not in out:
            out[name] = (
                load_metric(name, max_length=max_length, precision=precision)
                .score(mt=mt, ref=ref, src=src, batch_size=batch_size, device=device, progress=progress)
                .scores
            )
    return {n: out[n] for n in names}
