"""What a metric is: :class:`Metric` and its :class:`ScoreResult` (with a
:class:`~lightning_metrics.signature.Signature`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.signature import Signature
from lightning_metrics.tables import take_rows

__all__ = ["Metric", "ScoreResult", "Segments", "Signature"]


@dataclass
class ScoreResult:
    """Segment scores (input order), the system score, and the signature string; ``extra`` holds
    per-row lists beside the scores: ``std`` (MC dropout), ``spans`` (a unified model's error spans:
    ``start``, ``end`` character offsets into the mt, ``severity``, ``confidence``)."""

    scores: list[float]
    system_score: float
    signature: str
    extra: dict = field(default_factory=dict)
    truncated: int = 0  # rows longer than the metric's max_length, cut to it (learned metrics)


@dataclass
class Segments:
    """What one scoring found, returned rather than kept on the metric (so one metric object serves
    several threads): the scores, per-row ``extra`` (``spans``), the rows cut, and the precision the
    weights ran in (learned metrics; ``None`` where it does not apply)."""

    scores: list[float]
    extra: dict = field(default_factory=dict)
    truncated: int = 0
    precision: str | None = None


def reference_count(ref) -> int:
    """References per row: 0 without any, the most any row has when rows hold lists, else 1."""
    if ref is None:
        return 0
    return max((1 if isinstance(r, str) else len(r) for r in ref), default=1)


class Metric(ABC):
    """A metric: ``score(mt=..., ref=..., src=...) -> ScoreResult``.

    ``inputs`` names the fields it reads. Subclasses give :meth:`segment_scores`, the
    :attr:`signature`, and where the system score is not the mean of the segments,
    :meth:`system_score` (corpus BLEU and chrF).
    """

    name: str = "metric"
    inputs: tuple[str, ...] = ("mt", "ref")
    higher_is_better: bool = True  # False for error scores (MetricX): every comparison turns them round
    native_multi_ref = (
        False  # True: segment_scores takes a list of references per row itself (BLEU, chrF, ROUGE, BERTScore)
    )

    @property
    def needs_ref(self) -> bool:
        return "ref" in self.inputs

    @property
    def needs_src(self) -> bool:
        return "src" in self.inputs

    @property
    @abstractmethod
    def signature(self) -> Signature:
        """The settings that made the numbers."""

    @abstractmethod
    def segment_scores(self, columns: dict[str, list[str]], options: ScoreOptions) -> list[float]:
        """One score per row of ``columns`` (the fields of :attr:`inputs`, equal lengths), run as
        ``options`` say (its device already resolved)."""

    def system_score(self, scores: Sequence[float], columns: dict[str, list[str]]) -> float:
        """The system-level score of these rows; the mean of the segment scores unless overridden."""
        return float(np.mean(scores)) if len(scores) else float("nan")

    def resampled_system_scores(
        self, scores: Sequence[float], columns: dict[str, list[str]], resamples: np.ndarray
    ) -> np.ndarray:
        """The system score of each bootstrap resample (a row of segment indices in ``resamples``);
        the mean unless overridden (BLEU and chrF resample their corpus statistics)."""
        return np.asarray(scores, dtype=np.float64)[resamples].mean(axis=1)

    def score(
        self,
        mt: Sequence[str],
        ref: Sequence[str] | None = None,
        src: Sequence[str] | None = None,
        *,
        options: ScoreOptions | None = None,
        mc_dropout: int = 0,
        seed: int = 0,
        multi_ref: str = "max",
        **run,
    ) -> ScoreResult:
        """Score candidates ``mt`` (against ``ref``, given ``src`` where the metric reads them).

        ``options`` (:class:`~lightning_metrics.encoders.inference.ScoreOptions`: ``batch_size``,
        ``device``, ``devices``, ``progress``) say how it runs; they may also be given one by one
        (``score(mt=..., ref=..., device="cuda")``). ``mc_dropout=N`` (learned metrics): N passes with
        dropout on, seeded by ``seed``; the scores are the per-segment means and ``extra["std"]`` their
        standard deviations (N times the cost). ``ref`` may hold a list of references per row: built-in
        metrics use them as their packages do; other metrics score against each and keep the
        ``multi_ref`` (``max`` or ``mean``) per row.
        """
        options = _options(options, run).on_device()
        columns = self.columns(mt, ref, src)
        nrefs = reference_count(columns.get("ref"))
        if nrefs > 1 and not self.native_multi_ref:
            return self._score_each_reference(columns, nrefs, multi_ref, options, mc_dropout, seed)
        if mc_dropout:
            if mc_dropout < 2:
                raise LightningMetricsError(f"mc_dropout needs at least 2 passes, got {mc_dropout}")
            passes = np.asarray(self.stochastic_scores(columns, mc_dropout, seed, options))
            mean, std = passes.mean(axis=0), passes.std(axis=0)
            signature = (
                self.signature.replace(nrefs=nrefs) if nrefs > 1 else self.signature
            )  # after scoring: it names the precision used
            return ScoreResult(
                scores=mean.tolist(),
                system_score=self.system_score(mean.tolist(), columns),
                signature=str(signature.replace(mc_dropout=mc_dropout, seed=seed)),
                extra={"std": std.tolist()},
            )
        found = self.segment_result(columns, options)
        scores = [float(s) for s in found.scores]
        signature = self.signature_of(found)
        signature = signature.replace(nrefs=nrefs) if nrefs > 1 else signature
        return ScoreResult(
            scores=scores,
            system_score=self.system_score(scores, columns),
            signature=str(signature),
            extra=found.extra,
            truncated=found.truncated,
        )

    def segment_result(self, columns: dict[str, list[str]], options: ScoreOptions) -> Segments:
        """:meth:`segment_scores` with what else the scoring found (spans, rows cut); most metrics find
        nothing else."""
        return Segments(list(self.segment_scores(columns, options)))

    def signature_of(self, found: Segments) -> Signature:
        """The signature of one scoring (a learned metric's names the precision it ran in)."""
        return self.signature

    def _score_each_reference(
        self, columns: dict, nrefs: int, multi_ref: str, options: ScoreOptions, mc_dropout: int, seed: int
    ) -> ScoreResult:
        """Score every (row, reference) pair as its own row, then keep the max or the mean per row."""
        if multi_ref not in ("max", "mean"):
            raise LightningMetricsError(f"multi_ref must be max or mean, got {multi_ref!r}")
        refs = [[r] if isinstance(r, str) else list(r) for r in columns["ref"]]
        owner = [i for i, rs in enumerate(refs) for _ in rs]
        flat = take_rows({k: v for k, v in columns.items() if k != "ref"}, owner)
        flat["ref"] = [r for rs in refs for r in rs]
        result = self.score(
            flat["mt"],
            flat["ref"],
            flat.get("src"),
            options=options,
            mc_dropout=mc_dropout,
            seed=seed,
            multi_ref=multi_ref,
        )
        values, std = np.asarray(result.scores), result.extra.get("std")
        scores, spread, start = [], [], 0
        for rs in refs:
            part = slice(start, start + len(rs))
            pick = start + int(np.argmax(values[part])) if multi_ref == "max" else None
            scores.append(float(values[pick]) if pick is not None else float(values[part].mean()))
            if std is not None:
                spread.append(float(std[pick]) if pick is not None else float(np.mean(std[part])))
            start += len(rs)
        signature = Signature.parse(result.signature).replace(nrefs=nrefs, multi_ref=multi_ref)
        return ScoreResult(
            scores=scores,
            system_score=self.system_score(scores, columns),
            signature=str(signature),
            extra={"std": spread} if std is not None else {},
            truncated=result.truncated,
        )

    def stochastic_scores(
        self, columns: dict[str, list[str]], passes: int, seed: int, options: ScoreOptions
    ) -> np.ndarray:
        """``[passes, rows]`` scores with dropout on (MC dropout); only learned metrics have dropout."""
        raise LightningMetricsError(
            f"{self.name} has no dropout: --mc-dropout needs a learned metric (an exported folder)"
        )

    def columns(self, mt, ref=None, src=None) -> dict[str, list[str]]:
        """The fields this metric reads, checked: present where needed, equal in length."""
        given = {"src": src, "mt": mt, "ref": ref}
        for name in self.inputs:
            if given[name] is None:
                flag = {"ref": "-r FILE", "src": "-s FILE", "mt": "-t FILE"}[name]
                raise LightningMetricsError(f"{self.name} needs {_plural(name)} ({name}=... or {flag})")
        lengths = {k: len(v) for k, v in given.items() if v is not None}
        if len(set(lengths.values())) > 1:
            raise LightningMetricsError(
                "inputs differ in length: "
                + ", ".join(f"{n} {k}" for k, n in sorted(lengths.items(), key=_field_order))
            )
        return {k: list(given[k]) for k in self.inputs}


def _options(options: ScoreOptions | None, run: dict) -> ScoreOptions:
    """``options`` with the ones given by name (``device="cuda"``) applied; an unknown name is one line."""
    known = tuple(ScoreOptions.__dataclass_fields__)
    unknown = sorted(set(run) - set(known))
    if unknown:
        raise LightningMetricsError(f"score() has no option {unknown[0]!r}; its options are {', '.join(known)}")
    return (options or ScoreOptions()).replace(**run)


def _plural(name: str) -> str:
    return {"src": "sources", "ref": "references", "mt": "candidates"}[name]


def _field_order(item) -> int:
    return ("mt", "ref", "src").index(item[0])
