"""The one place that turns a metric spec into a :class:`~lightning_metrics.metrics.base.Metric`, and
scores with several metrics at once."""

from __future__ import annotations

from typing import Sequence

from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.base import Metric
from lightning_metrics.metrics.builtin import OPTIONS, BuiltinMetric, builtin, builtin_family_scores, family_of_name
from lightning_metrics.metrics.spec import MetricSpec, parse_spec, parse_specs
from lightning_metrics.storage.artifact import read_export, read_export_meta

EXPORT_OPTIONS = ("max_length", "precision")


def load_metric(spec: str | MetricSpec, **options) -> Metric:
    """The metric a spec names (:mod:`~lightning_metrics.metrics.spec`): a built-in, ``NAME[:key=value,...]``
    (``load_metric("bertscore:model=multilingual-e5-small,layer=7")``), or an exported folder.

    ``options`` add to a built-in's own (``load_metric("bleu", lowercase=True)``; the spec's win) or, for a
    folder, are ``max_length`` (tokens per sequence; default: the length it was trained with, recorded in
    the export, else 512, or the encoder's limit when smaller; longer rows are truncated with a warning
    that counts them) and ``precision`` (``fp32``, ``bf16`` or ``auto``: bf16 on CUDA, fp32 elsewhere; the
    signature names the one used). A built-in ignores ``max_length``, and ``precision`` unless it is
    BERTScore; None means "not given". A folder is verified against its manifest and loads offline.
    """
    spec = parse_spec(spec)
    given = {k: v for k, v in options.items() if v is not None}
    if not spec.is_builtin:
        unknown = sorted(set(given) - set(EXPORT_OPTIONS))
        if unknown:
            raise LightningMetricsError(
                f"{spec.text}: an exported metric takes no options but max_length and precision (got {unknown})"
            )
        return load_export(spec.folder, given.get("max_length"), given.get("precision") or "auto")
    return _builtin(spec, given)


def _builtin(spec: MetricSpec, given: dict) -> BuiltinMetric:
    extra = {k: v for k, v in given.items() if k != "max_length"}
    if extra.get("precision") == "auto":
        extra.pop("precision")  # auto is every built-in's default; only BERTScore has the option
    num_proc = extra.pop("num_proc", 1)
    return builtin(spec.name, num_proc, **{**extra, **spec.options})


def _precision_for(spec: MetricSpec, precision: str | None) -> dict:
    """The shared ``precision`` as an option of the built-ins that have one (BERTScore), else nothing."""
    family = family_of_name(spec.name)
    return {"precision": precision} if precision is not None and "precision" in OPTIONS[family] else {}


def load_export(path: str, max_length: int | None = None, precision: str | None = "auto") -> Metric:
    """The metric of a verified export folder: an ensemble of its members, or a learned metric."""
    from lightning_metrics.metrics.ensemble import FAMILY, Ensemble
    from lightning_metrics.metrics.learned import LearnedMetric

    export = read_export(path)
    if export.family == FAMILY:
        return Ensemble.from_export(export, lambda member: load_export(member, max_length, precision))
    return LearnedMetric(path, export, max_length, precision)


def metric_inputs(spec: str | MetricSpec) -> tuple[str, ...]:
    """The fields a metric reads, without loading it (built-ins read mt and ref)."""
    spec = parse_spec(spec)
    if spec.is_builtin:
        return ("mt", "ref")
    return tuple(read_export_meta(spec.folder).get("inputs", ("mt", "ref")))


def score_many(
    specs: Sequence[str | MetricSpec],
    mt: Sequence[str],
    ref: Sequence[str] | None = None,
    src: Sequence[str] | None = None,
    options: ScoreOptions | None = None,
    num_proc: int = 1,
    max_length: int | None = None,
    precision: str | None = None,
    spans: dict | None = None,
    lower_is_better: set | None = None,
) -> dict[str, list[float]]:
    """Segment scores per metric, keyed by each spec's label (the spec as given, or its ``LABEL=``).
    A ``spans`` dict receives, under the same labels, the error spans of the metrics that find them;
    a ``lower_is_better`` set, the labels of metrics whose scores are lower for better output (MetricX).

    Built-ins of one family with equal settings (BERTScore P/R/F) are computed once; ``num_proc``
    processes share the lexical metrics; ``max_length`` goes to exported metrics, and ``precision``
    (fp32, bf16, auto) to them and to BERTScore where the spec does not set it.
    """
    specs = parse_specs(specs)
    options = (options or ScoreOptions()).on_device()
    built = {
        s.label: _builtin(s, {"num_proc": num_proc, **_precision_for(s, precision)}) for s in specs if s.is_builtin
    }
    out = builtin_family_scores(built, mt, ref, options) if built else {}
    for spec in specs:
        if not spec.is_builtin:
            metric = load_metric(spec, max_length=max_length, precision=precision)
            result = metric.score(mt=mt, ref=ref, src=src, options=options)
            out[spec.label] = result.scores
            if lower_is_better is not None and not metric.higher_is_better:
                lower_is_better.add(spec.label)
            if spans is not None and "spans" in result.extra:
                spans[spec.label] = result.extra["spans"]
    return {s.label: out[s.label] for s in specs}
