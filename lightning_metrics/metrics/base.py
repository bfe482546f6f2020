"""What a metric is: :class:`Metric`, its :class:`ScoreResult` and its :class:`Signature`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from lightning_metrics import __version__
from lightning_metrics.errors import LightningMetricsError

FIELDS = ("src", "mt", "ref")


@dataclass(frozen=True)
class Signature:
    """How a number was made, sacrebleu-style: ``name|key:value|...|lightning-metrics:X``.

    Built from a metric instance's own settings, so it changes when they do.
    """

    name: str
    settings: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, **settings) -> "Signature":
        shown = {k: ("yes" if v is True else "no" if v is False else str(v)) for k, v in settings.items()}
        return cls(name, (*shown.items(), ("lightning-metrics", __version__)))

    def __str__(self) -> str:
        return "|".join([self.name, *(f"{k}:{v}" for k, v in self.settings)])

    def get(self, key: str) -> str | None:
        return dict(self.settings).get(key)


@dataclass
class ScoreResult:
    """Segment scores (input order), the system score, and the signature string."""

    scores: list[float]
    system_score: float
    signature: str
    extra: dict = field(default_factory=dict)


def resolve_device(device: str) -> str:
    """``auto`` is CUDA when present, else the CPU; any other name is returned as given."""
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


class Metric(ABC):
    """A metric: ``score(mt=..., ref=..., src=...) -> ScoreResult``.

    ``inputs`` names the fields it reads. Subclasses give :meth:`segment_scores`, the
    :attr:`signature`, and where the system score is not the mean of the segments,
    :meth:`system_score` (corpus BLEU and chrF).
    """

    name: str = "metric"
    inputs: tuple[str, ...] = ("mt", "ref")

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
    def segment_scores(self, columns: dict[str, list[str]], batch_size: int = 64, device: str = "cpu", devices: int = 1,
                       progress: bool | None = None) -> list[float]:
        """One score per row of ``columns`` (the fields of :attr:`inputs`, equal lengths)."""

    def system_score(self, scores: Sequence[float], columns: dict[str, list[str]]) -> float:
        """The system-level score of these rows; the mean of the segment scores unless overridden."""
        return float(np.mean(scores)) if len(scores) else float("nan")

    def resampled_system_scores(self, scores: Sequence[float], columns: dict[str, list[str]], resamples: np.ndarray) -> np.ndarray:
        """The system score of each bootstrap resample (a row of segment indices in ``resamples``);
        the mean unless overridden (BLEU and chrF resample their corpus statistics)."""
        return np.asarray(scores, dtype=np.float64)[resamples].mean(axis=1)

    def score(self, mt: Sequence[str], ref: Sequence[str] | None = None, src: Sequence[str] | None = None, batch_size: int = 64,
              device: str = "auto", devices: int = 1, progress: bool | None = None, mc_dropout: int = 0, seed: int = 0) -> ScoreResult:
        """Score candidates ``mt`` (against ``ref``, given ``src`` where the metric reads them).

        ``device``: ``auto`` (CUDA when present), ``cpu``, ``cuda``, ``cuda:1``...; ``devices > 1``
        scores learned metrics with Lightning's DDP. ``progress``: a progress bar (None: on for long inputs).
        ``mc_dropout=N`` (learned metrics): N passes with dropout on, seeded by ``seed``; the
        scores are the per-segment means and ``extra["std"]`` their standard deviations (N times the cost).
        """
        columns = self.columns(mt, ref, src)
        if mc_dropout:
            if mc_dropout < 2:
                raise LightningMetricsError(f"mc_dropout needs at least 2 passes, got {mc_dropout}")
            passes = np.asarray(self.stochastic_scores(columns, mc_dropout, seed, batch_size, resolve_device(device), devices, progress))
            mean, std = passes.mean(axis=0), passes.std(axis=0)
            signature = Signature(self.signature.name, (*self.signature.settings, ("mc_dropout", str(mc_dropout)), ("seed", str(seed))))
            return ScoreResult(scores=mean.tolist(), system_score=self.system_score(mean.tolist(), columns), signature=str(signature),
                               extra={"std": std.tolist()})
        scores = [float(s) for s in self.segment_scores(columns, batch_size, resolve_device(device), devices, progress)]
        return ScoreResult(scores=scores, system_score=self.system_score(scores, columns), signature=str(self.signature))

    def stochastic_scores(self, columns: dict[str, list[str]], passes: int, seed: int, batch_size: int = 64, device: str = "cpu",
                          devices: int = 1, progress: bool | None = None) -> np.ndarray:
        """``[passes, rows]`` scores with dropout on (MC dropout); only learned metrics have dropout."""
        raise LightningMetricsError(f"{self.name} has no dropout: --mc-dropout needs a learned metric (an exported folder)")

    def columns(self, mt, ref=None, src=None) -> dict[str, list[str]]:
        """The fields this metric reads, checked: present where needed, equal in length."""
        given = {"src": src, "mt": mt, "ref": ref}
        for name in self.inputs:
            if given[name] is None:
                flag = {"ref": "-r FILE", "src": "-s FILE", "mt": "-t FILE"}[name]
                raise LightningMetricsError(f"{self.name} needs {_plural(name)} ({name}=... or {flag})")
        lengths = {k: len(v) for k, v in given.items() if v is not None}
        if len(set(lengths.values())) > 1:
            raise LightningMetricsError("inputs differ in length: " + ", ".join(f"{n} {k}" for k, n in sorted(lengths.items(), key=_field_order)))
        return {k: list(given[k]) for k in self.inputs}


def _plural(name: str) -> str:
    return {"src": "sources", "ref": "references", "mt": "candidates"}[name]


def _field_order(item) -> int:
    return ("mt", "ref", "src").index(item[0])
