"""The built-in metrics: BLEU and chrF (sacrebleu), ROUGE-1/2/L (rouge-score), BERTScore P/R/F.

Segment scores are sentence level. BLEU's and chrF's system score is sacrebleu's *corpus*
score (statistics summed over the segments), which is what papers report; ROUGE's and
BERTScore's is the mean. Metrics computed together (ROUGE-1/2/L; BERTScore P/R/F) form a
family: :func:`builtin_scores` computes a family once however many of its members are asked for.

Names: ``bleu``, ``chrf``, ``rouge1``, ``rouge2``, ``rougeL``, ``bertscore_p``, ``bertscore_r``,
``bertscore_f`` (``bertscore`` is an alias of ``bertscore_f``).
"""

from __future__ import annotations

import inspect
from typing import Sequence

import numpy as np

from lightning_metrics import lexical
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.metrics.base import Metric, Signature


class BuiltinMetric(Metric):
    """A built-in metric; :meth:`compute_family` gives every member of its family at once."""

    native_multi_ref = True  # sacrebleu, rouge-score and bert-score take several references per segment
    option_group = "lexical"  # which shared options it takes: lexical (num_proc) or bertscore

    @property
    def family_key(self) -> tuple:
        """Metrics with equal keys share one :meth:`compute_family` call."""
        return (type(self).__name__, *self._settings().values())

    def _settings(self) -> dict:
        return {}

    def compute_family(
        self,
        mt: list[str],
        ref: list[str],
        batch_size: int | None = None,
        device: str = "cpu",
        progress: bool | None = None,
    ) -> dict[str, list[float]]:
        raise NotImplementedError

    def segment_scores(self, columns, batch_size=None, device="cpu", devices=1, progress=None) -> list[float]:
        return self.compute_family(columns["mt"], columns["ref"], batch_size, device, progress)[self.name]


class BLEU(BuiltinMetric):
    """Sentence BLEU with effective order per segment; corpus BLEU per system (sacrebleu)."""

    name = "bleu"

    def __init__(self, tokenize: str = "13a", smooth_method: str = "exp", lowercase: bool = False, num_proc: int = 1):
        self.tokenize, self.smooth_method, self.lowercase, self.num_proc = tokenize, smooth_method, lowercase, num_proc

    def _settings(self) -> dict:
        return {"tokenize": self.tokenize, "smooth_method": self.smooth_method, "lowercase": self.lowercase}

    @property
    def signature(self) -> Signature:
        import sacrebleu

        return Signature.of(
            "bleu",
            nrefs=1,
            case="lc" if self.lowercase else "mixed",
            tok=self.tokenize,
            smooth=self.smooth_method,
            segments="sentence_bleu",
            system="corpus_bleu",
            sacrebleu=sacrebleu.__version__,
        )

    def compute_family(self, mt, ref, batch_size=None, device="cpu", progress=None):
        return {"bleu": lexical.sentence_bleu(mt, ref, num_proc=self.num_proc, **self._settings())}

    def system_score(self, scores, columns) -> float:
        return lexical.corpus_bleu(columns["mt"], columns["ref"], **self._settings()) if scores else float("nan")

    def resampled_system_scores(self, scores, columns, resamples) -> np.ndarray:
        return _resampled_corpus("bleu", columns, resamples, self._settings())


class CHRF(BuiltinMetric):
    """Sentence chrF per segment; corpus chrF per system (sacrebleu). ``word_order=2`` is chrF++."""

    name = "chrf"

    def __init__(self, word_order: int = 0, lowercase: bool = False, num_proc: int = 1):
        self.word_order, self.lowercase, self.num_proc = word_order, lowercase, num_proc

    def _settings(self) -> dict:
        return {"word_order": self.word_order, "lowercase": self.lowercase}

    @property
    def signature(self) -> Signature:
        import sacrebleu

        return Signature.of(
            "chrf",
            nrefs=1,
            case="lc" if self.lowercase else "mixed",
            nc=6,
            nw=self.word_order,
            space="no",
            segments="sentence_chrf",
            system="corpus_chrf",
            sacrebleu=sacrebleu.__version__,
        )

    def compute_family(self, mt, ref, batch_size=None, device="cpu", progress=None):
        return {"chrf": lexical.sentence_chrf(mt, ref, num_proc=self.num_proc, **self._settings())}

    def system_score(self, scores, columns) -> float:
        return lexical.corpus_chrf(columns["mt"], columns["ref"], **self._settings()) if scores else float("nan")

    def resampled_system_scores(self, scores, columns, resamples) -> np.ndarray:
        return _resampled_corpus("chrf", columns, resamples, self._settings())


def _resampled_corpus(kind: str, columns: dict, resamples: np.ndarray, settings: dict) -> np.ndarray:
    """Corpus BLEU/chrF of each resample, from per-segment statistics (sacrebleu's ``--paired-bs`` way)."""
    stats = lexical.corpus_statistics(kind, columns["mt"], columns["ref"], **settings)
    return np.array([lexical.score_from_statistics(kind, stats[rows].sum(0), **settings) for rows in resamples])


class ROUGE(BuiltinMetric):
    """ROUGE-1, ROUGE-2 or ROUGE-L F-measure (rouge-score); the system score is the mean."""

    def __init__(self, variant: str = "rougeL", use_stemmer: bool = False, num_proc: int = 1):
        if variant not in lexical.ROUGE_TYPES:
            raise LightningMetricsError(f"unknown ROUGE variant {variant!r}; choose from {list(lexical.ROUGE_TYPES)}")
        self.name, self.use_stemmer, self.num_proc = variant, use_stemmer, num_proc

    def _settings(self) -> dict:
        return {"use_stemmer": self.use_stemmer}

    @property
    def signature(self) -> Signature:
        return Signature.of(self.name, nrefs=1, stemmer=self.use_stemmer, score="fmeasure", system="mean")

    def compute_family(self, mt, ref, batch_size=None, device="cpu", progress=None):
        scores = lexical.sentence_rouge(mt, ref, use_stemmer=self.use_stemmer, num_proc=self.num_proc)
        return {t: scores[t]["fmeasure"] for t in lexical.ROUGE_TYPES}


class BERTScore(BuiltinMetric):
    """BERTScore precision, recall or F1 (:class:`~lightning_metrics.bertscore.BERTScorer`); the system
    score is the mean."""

    option_group = "bertscore"

    def __init__(
        self,
        part: str = "f",
        model: str = "default",
        layer: int | None = None,
        idf: bool = False,
        baseline: str | dict | None = None,
        precision: str | None = None,
        batch_size: int | None = None,
    ):
        if part not in ("p", "r", "f"):
            raise LightningMetricsError(f"BERTScore part must be p, r or f, got {part!r}")
        self.name = f"bertscore_{part}"
        self.model, self.layer, self.idf, self.baseline, self.precision = str(model), layer, idf, baseline, precision
        self.batch_size = batch_size
        self._scorer = None

    def _settings(self) -> dict:
        return {
            "model": self.model,
            "layer": self.layer,
            "idf": self.idf,
            "baseline": str(self.baseline),
            "precision": self.precision,
        }

    def scorer(self, device: str = "cpu", batch_size: int | None = None, progress: bool | None = None):
        """The BERTScorer for ``device``, built once and kept."""
        import torch

        from lightning_metrics.bertscore import BERTScorer

        if self._scorer is None or self._scorer.device != torch.device(device):
            self._scorer = BERTScorer(
                self.model,
                layer=self.layer,
                idf=self.idf,
                baseline=self.baseline,
                device=device,
                precision=self.precision,
            )
        self._scorer.batch_size, self._scorer.progress = self.batch_size or batch_size, progress
        return self._scorer

    @property
    def signature(self) -> Signature:
        settings = (self._scorer or self.scorer("cpu")).settings
        return Signature.of(self.name, nrefs=1, **settings, system="mean")

    def compute_family(self, mt, ref, batch_size=None, device="cpu", progress=None):
        """With several references per segment, P, R and F each take the best reference, as bert-score does."""
        if all(isinstance(r, str) for r in ref):
            return self.scorer(device, batch_size, progress).score(mt, ref).as_dict()
        refs = [[r] if isinstance(r, str) else list(r) for r in ref]
        flat = (
            self.scorer(device, batch_size, progress)
            .score([m for m, rs in zip(mt, refs) for _ in rs], [r for rs in refs for r in rs])
            .as_dict()
        )
        bounds = np.cumsum([0, *map(len, refs)])
        return {k: [float(np.max(v[a:b])) for a, b in zip(bounds[:-1], bounds[1:])] for k, v in flat.items()}


# name -> (class, the arguments that make it this metric)
BUILTIN: dict[str, tuple[type[BuiltinMetric], dict]] = {
    "bleu": (BLEU, {}),
    "chrf": (CHRF, {}),
    **{variant: (ROUGE, {"variant": variant}) for variant in lexical.ROUGE_TYPES},
    **{f"bertscore_{part}": (BERTScore, {"part": part}) for part in "prf"},
}
ALIASES = {"bertscore": "bertscore_f"}


def builtin_names() -> list[str]:
    """Every built-in metric name, aliases included."""
    return [*BUILTIN, *ALIASES]


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)


def builtin(name: str, **options) -> BuiltinMetric:
    """A built-in metric by name, with its options (``load_metric("bertscore", model=..., layer=4)``)."""
    key = canonical_name(name)
    if key not in BUILTIN:
        raise LightningMetricsError(f"unknown metric {name!r}; built-in metrics are {builtin_names()}")
    cls, fixed = BUILTIN[key]
    known = [p for p in inspect.signature(cls).parameters if p not in fixed]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise LightningMetricsError(f"{name} has no option {unknown[0]!r}; its options are {known}")
    return cls(**fixed, **options)


def options_for(name: str, num_proc: int = 1, bertscore: dict | None = None) -> dict:
    """The shared options that apply to the built-in metric ``name``: ``num_proc`` or the BERTScore settings."""
    if BUILTIN[canonical_name(name)][0].option_group == "bertscore":
        return {
            k: v
            for k, v in (bertscore or {}).items()
            if k in ("model", "layer", "idf", "baseline", "precision", "batch_size")
        }
    return {"num_proc": num_proc}


def builtin_scores(
    names: Sequence[str],
    mt: Sequence[str],
    ref: Sequence[str],
    num_proc: int = 1,
    bertscore: dict | None = None,
    device: str = "cpu",
    progress: bool | None = None,
) -> dict[str, list[float]]:
    """Segment scores per built-in name (keys as given), each family computed once.

    ``bertscore`` holds BERTScore's settings (model, layer, idf, baseline, precision, batch_size).
    """
    mt, ref = list(mt), list(ref)
    metrics = {n: builtin(n, **options_for(n, num_proc, bertscore)) for n in names}
    computed: dict[tuple, dict[str, list[float]]] = {}
    out = {}
    for name, metric in metrics.items():
        if metric.family_key not in computed:
            metric.columns(mt, ref)  # the same checks as score()
            computed[metric.family_key] = metric.compute_family(
                mt, ref, (bertscore or {}).get("batch_size"), device, progress
            )
        out[name] = list(computed[metric.family_key][metric.name])
    return out
