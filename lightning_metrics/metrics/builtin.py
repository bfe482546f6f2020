"""The built-in metrics: BLEU and chrF (sacrebleu), ROUGE-1/2/L (rouge-score), BERTScore P/R/F.

Segment scores are sentence level and come from :mod:`lightning_metrics.baselines.scores`, the one
route every baseline value takes. BLEU's and chrF's system score is sacrebleu's *corpus* score
(statistics summed over the segments), which is what papers report; ROUGE's and BERTScore's is the
mean. Metrics computed together (ROUGE-1/2/L; BERTScore P/R/F) form a family:
:func:`builtin_family_scores` computes a family once however many of its members are asked for.

Names: ``bleu``, ``chrf``, ``rouge1``, ``rouge2``, ``rougeL``, ``bertscore_p``, ``bertscore_r``,
``bertscore_f`` (``bertscore`` is an alias of ``bertscore_f``). Their options are
:data:`OPTIONS`, the one table the metric spec (:mod:`.spec`) reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from lightning_metrics.baselines import lexical
from lightning_metrics.baselines.scores import FAMILIES, FAMILY_OF, bertscore_with_references, family_scores
from lightning_metrics.encoders.inference import PRECISIONS, ScoreOptions
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.base import Metric
from lightning_metrics.signature import Signature


@dataclass(frozen=True)
class Option:
    """One option of a built-in metric: its type, and the values it allows (None: any of the type)."""

    kind: type
    default: object
    allowed: Callable[[object], bool] | None = None
    says: str = ""  # what ``allowed`` asks, for the one-line error

    def check(self, metric: str, key: str, value):
        """``value`` as this option's type, or one line naming the metric, the key and the problem."""
        if value is None and self.default is None:
            return None
        if self.kind is bool and not isinstance(value, bool):
            raise LightningMetricsError(f"{metric}: {key}={value!r} is not true or false")
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise LightningMetricsError(f"{metric}: {key}={value!r} is not a whole number")
        if self.kind is str and not isinstance(value, str):
            value = str(value)
        if self.allowed is not None and not self.allowed(value):
            raise LightningMetricsError(f"{metric}: {key}={value!r} is not {self.says}")
        return value


def _sacrebleu_tokenizers() -> tuple[str, ...]:
    from sacrebleu.metrics.bleu import _TOKENIZERS

    return tuple(_TOKENIZERS)


SMOOTH_METHODS = ("exp", "floor", "add-k", "none")
OPTIONS: dict[str, dict[str, Option]] = {
    "bleu": {
        "tokenize": Option(str, "13a", lambda v: v in _sacrebleu_tokenizers(), "one of sacrebleu's tokenizers"),
        "smooth_method": Option(str, "exp", lambda v: v in SMOOTH_METHODS, f"one of {', '.join(SMOOTH_METHODS)}"),
        "lowercase": Option(bool, False),
    },
    "chrf": {
        "char_order": Option(int, 6, lambda v: v >= 1, "at least 1"),
        "word_order": Option(int, 0, lambda v: v >= 0, "at least 0"),
        "lowercase": Option(bool, False),
    },
    "rouge": {"use_stemmer": Option(bool, False)},
    "bertscore": {
        "model": Option(str, "default"),
        "layer": Option(int, None, lambda v: v >= 0, "at least 0"),
        "idf": Option(bool, False),
        "baseline": Option(str, None),
        "precision": Option(str, None, lambda v: v in PRECISIONS, f"one of {', '.join(PRECISIONS)}"),
    },
}


def checked_options(family: str, name: str, options: dict) -> dict:
    """``options`` of the built-in ``name`` (of ``family``), each as its :data:`OPTIONS` type; an unknown key
    or a bad value is one line naming the metric and the key. The metric spec checks them here once."""
    table = OPTIONS[family]
    unknown = sorted(set(options) - set(table))
    if unknown:
        raise LightningMetricsError(f"{name} has no option {unknown[0]!r}; its options are {', '.join(table)}")
    return {k: table[k].check(name, k, v) for k, v in options.items()}


class BuiltinMetric(Metric):
    """A built-in metric of one family; :meth:`compute_family` gives every member of the family at once."""

    native_multi_ref = True  # sacrebleu, rouge-score and bert-score take several references per segment
    family = "lexical"

    def __init__(self, name: str, num_proc: int = 1, **options):
        self.name, self.num_proc = name, num_proc
        self.given = checked_options(self.family, name, options)
        self.settings = {k: self.given.get(k, option.default) for k, option in OPTIONS[self.family].items()}

    @property
    def spec(self) -> str:
        """This metric as a spec, ``NAME[:key=value,...]``, with the options given to it."""
        shown = ",".join(f"{k}={_text(v)}" for k, v in self.given.items())
        return f"{self.name}:{shown}" if shown else self.name

    @property
    def family_key(self) -> tuple:
        """Metrics with equal keys share one :meth:`compute_family` call."""
        return (self.family, *map(str, self.settings.values()))

    def compute_family(self, mt: list[str], ref: list, options: ScoreOptions) -> dict[str, list[float]]:
        """Segment scores of every member of this metric's family, with its settings."""
        return family_scores(self.family, mt, ref, self.settings, options, self.num_proc)

    def segment_scores(self, columns, options: ScoreOptions) -> list[float]:
        return self.compute_family(columns["mt"], columns["ref"], options)[self.name]

    def signed(self, **settings) -> Signature:
        return Signature.of(self.name, spec=self.spec, **settings)


class CorpusLexical(BuiltinMetric):
    """BLEU and chrF: a sentence score per segment, and per system sacrebleu's corpus score (statistics
    summed over the segments), resampled from per-segment statistics for bootstrap intervals."""

    def shown_settings(self) -> dict:
        """The family's own signature settings (tokenizer and smoothing; character and word orders)."""
        raise NotImplementedError

    @property
    def signature(self) -> Signature:
        import sacrebleu

        case = "lc" if self.settings["lowercase"] else "mixed"
        return self.signed(
            nrefs=1, case=case, **self.shown_settings(), segments=f"sentence_{self.family}",
            system=f"corpus_{self.family}", sacrebleu=sacrebleu.__version__,
        )  # fmt: skip

    def system_score(self, scores, columns) -> float:
        corpus = getattr(lexical, f"corpus_{self.family}")
        return corpus(columns["mt"], columns["ref"], **self.settings) if scores else float("nan")

    def resampled_system_scores(self, scores, columns, resamples) -> np.ndarray:
        stats = lexical.corpus_statistics(self.family, columns["mt"], columns["ref"], **self.settings)
        return np.array(
            [lexical.score_from_statistics(self.family, stats[rows].sum(0), **self.settings) for rows in resamples]
        )


class BLEU(CorpusLexical):
    """Sentence BLEU with effective order per segment; corpus BLEU per system (sacrebleu)."""

    family = "bleu"

    def shown_settings(self) -> dict:
        return {"tok": self.settings["tokenize"], "smooth": self.settings["smooth_method"]}


class CHRF(CorpusLexical):
    """Sentence chrF per segment; corpus chrF per system (sacrebleu). ``word_order=2`` is chrF++."""

    family = "chrf"

    def shown_settings(self) -> dict:
        return {"nc": self.settings["char_order"], "nw": self.settings["word_order"], "space": "no"}


class ROUGE(BuiltinMetric):
    """ROUGE-1, ROUGE-2 or ROUGE-L F-measure (rouge-score); the system score is the mean."""

    family = "rouge"

    @property
    def signature(self) -> Signature:
        return self.signed(nrefs=1, stemmer=self.settings["use_stemmer"], score="fmeasure", system="mean")


class BERTScore(BuiltinMetric):
    """BERTScore precision, recall or F1 (:class:`~lightning_metrics.baselines.bertscore.BERTScorer`); the
    system score is the mean. The scorer (its encoder loaded once) is kept between calls."""

    family = "bertscore"

    def __init__(self, name: str, num_proc: int = 1, **options):
        super().__init__(name, num_proc, **options)
        self._scorer = None

    def scorer(self, options: ScoreOptions):
        """The BERTScorer for ``options.device``, built once and kept (a call's batch size and progress
        go to that call)."""
        import torch

        from lightning_metrics.baselines.bertscore import BERTScorer

        device = options.on_device().device
        if self._scorer is None or self._scorer.device != torch.device(device):
            self._scorer = BERTScorer(**self.settings, device=device)
        return self._scorer

    @property
    def signature(self) -> Signature:
        from lightning_metrics.baselines.bertscore import settings_of

        settings = self._scorer.settings if self._scorer is not None else settings_of(**self.settings)
        return self.signed(nrefs=1, **settings, system="mean")

    def compute_family(self, mt, ref, options: ScoreOptions):
        run = {"batch_size": options.batch_size, "progress": options.progress}
        return bertscore_with_references(self.scorer(options), list(mt), list(ref), **run)


CLASSES = {"bleu": BLEU, "chrf": CHRF, "rouge": ROUGE, "bertscore": BERTScore}
assert set(CLASSES) == set(FAMILIES) == set(OPTIONS), "one class and one option table per baseline family"
NAMES = FAMILY_OF  # member name -> family, from the one family table (baselines.scores.FAMILIES)
ALIASES = {"bertscore": "bertscore_f"}
BY_LOWER_CASE = {name.lower(): name for name in NAMES}  # rougeL is the one name with a capital


def builtin_names() -> list[str]:
    """Every built-in metric name, aliases included."""
    return [*NAMES, *ALIASES]


def canonical_name(name: str) -> str:
    """The built-in's own name for ``name``, in any letter case (``chrF``, ``BLEU`` as sacrebleu writes them)."""
    key = name.lower()
    return BY_LOWER_CASE.get(ALIASES.get(key, key), name)


def is_builtin_name(name: str) -> bool:
    return canonical_name(str(name)) in NAMES


def family_of_name(name: str) -> str:
    """The family of the built-in ``name`` (any letter case, aliases too)."""
    key = canonical_name(name)
    if key not in NAMES:
        raise LightningMetricsError(f"unknown metric {name!r}; built-in metrics are {builtin_names()}")
    return NAMES[key]


def builtin(name: str, num_proc: int = 1, **options) -> BuiltinMetric:
    """A built-in metric by name, with its options (``builtin("bertscore", model=..., layer=4)``)."""
    key = canonical_name(name)
    if key not in NAMES:
        raise LightningMetricsError(f"unknown metric {name!r}; built-in metrics are {builtin_names()}")
    return CLASSES[NAMES[key]](key, num_proc, **options)


def builtin_family_scores(
    metrics: dict[str, BuiltinMetric], mt: Sequence[str], ref: Sequence, options: ScoreOptions
) -> dict[str, list[float]]:
    """Segment scores per label of ``metrics`` (keys as given), each family with equal settings computed once."""
    mt, ref = list(mt), list(ref)
    computed: dict[tuple, dict[str, list[float]]] = {}
    out = {}
    for label, metric in metrics.items():
        if metric.family_key not in computed:
            metric.columns(mt, ref)  # the same checks as score()
            computed[metric.family_key] = metric.compute_family(mt, ref, options)
        out[label] = list(computed[metric.family_key][metric.name])
    return out


def _text(value) -> str:
    return "true" if value is True else "false" if value is False else str(value)
