"""Several rating sources in one training set: how each is read, split and put on one scale.

DA z-scores and MQM penalties live on different scales, and MQM is mostly zeros with a heavy
tail. :func:`normalise_scores` maps each (source, language pair) group onto a common scale with
statistics from the training rows only:

- ``z``: ``(x - mean) / std`` of the group;
- ``rank``: the normal quantile of the value's mid-rank in the group's training values,
  ``Φ⁻¹((#below + #equal / 2) / n)``, so ties (MQM's many zeros) share one value and a heavy
  tail cannot dominate;
- ``none``: the scores as given.

Validation rows are mapped with the training statistics of their group (a group unseen in
training uses its source's pooled statistics).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.tables import take_rows

NORMALISATIONS = ("none", "z", "rank")


@dataclass
class RatingSource:
    """One table of human ratings in a mixed training set.

    ``name`` defaults to the file's stem; ``columns`` maps canonical names to the file's;
    ``weight`` multiplies the loss of its rows; ``split_by`` is the column whose groups move to
    validation whole (``doc_id``; ``seg_id`` for data without documents; None: single rows);
    ``lps`` keeps only these language pairs, ``exclude_lps`` drops these.
    """

    path: str
    name: Optional[str] = None
    columns: Optional[dict] = None
    weight: float = 1.0
    split_by: Optional[str] = "doc_id"
    lps: Optional[list[str]] = None
    exclude_lps: Optional[list[str]] = None

    def select(self, rows: dict[str, list]) -> dict[str, list]:
        """The rows of the chosen language pairs (an error when none is left)."""
        if self.lps is None and not self.exclude_lps:
            return rows
        if "lp" not in rows:
            raise InputError(self.path, "lps/exclude_lps need an lp column")
        keep = [
            i
            for i, lp in enumerate(rows["lp"])
            if (self.lps is None or lp in self.lps) and lp not in (self.exclude_lps or ())
        ]
        if not keep:
            raise InputError(
                self.path,
                f"no rows left after choosing language pairs (lps {self.lps}, exclude_lps {self.exclude_lps})",
            )
        return take_rows(rows, keep)

    @classmethod
    def from_any(cls, value) -> "RatingSource":
        if isinstance(value, RatingSource):
            return value
        if isinstance(value, (str, Path)):
            return cls(path=str(value))
        if isinstance(value, dict):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise LightningMetricsError(
                    f"unknown rating-source key(s) {sorted(unknown)}; known: {sorted(cls.__dataclass_fields__)}"
                )
            if "path" not in value:
                raise LightningMetricsError(f"a rating source needs a path, got {value}")
            return cls(**value)
        raise LightningMetricsError(f"a rating source is a path or a mapping with a path, got {value!r}")

    @property
    def label(self) -> str:
        return self.name or Path(self.path).stem


def _mid_rank_quantiles(reference: np.ndarray, values: np.ndarray) -> np.ndarray:
    from scipy.special import ndtri

    ordered = np.sort(reference)
    below = np.searchsorted(ordered, values, side="left")
    equal = np.searchsorted(ordered, values, side="right") - below
    n = len(ordered)
    p = np.clip((below + equal / 2) / n, 0.5 / n, 1 - 0.5 / n)
    return ndtri(p)


def normalise_scores(
    scores: Sequence[float],
    groups: Sequence[str],
    method: str,
    train_scores: Sequence[float] | None = None,
    train_groups: Sequence[str] | None = None,
    pooled: dict[str, str] | None = None,
) -> np.ndarray:
    """``scores`` normalised per group by ``method`` (see the module docstring).

    Statistics come from ``train_scores``/``train_groups`` (default: the scores themselves).
    ``pooled`` maps a group to a fallback key (its source) for groups without training rows.
    """
    if method not in NORMALISATIONS:
        raise LightningMetricsError(f"normalise must be one of {NORMALISATIONS}, got {method!r}")
    x = np.asarray(scores, dtype=np.float64)
    if method == "none":
        return x.copy()
    groups = np.asarray([str(g) for g in groups])
    ref_x = x if train_scores is None else np.asarray(train_scores, dtype=np.float64)
    ref_g = groups if train_groups is None else np.asarray([str(g) for g in train_groups])
    out = np.empty_like(x)
    for group in np.unique(groups):
        sel = groups == group
        ref = ref_x[ref_g == group]
        if not len(ref) and pooled is not None:
            fallback = pooled.get(group)
            ref = ref_x[np.asarray([pooled.get(g) == fallback for g in ref_g])]
        if not len(ref):
            raise LightningMetricsError(f"no training rows to normalise group {group!r} with")
        if method == "z":
            std = ref.std()
            out[sel] = (x[sel] - ref.mean()) / (std if std > 0 else 1.0)
        else:
            out[sel] = _mid_rank_quantiles(ref, x[sel])
    return out


def row_weights(sources: Sequence[str], weight_of: dict[str, float], counts: Sequence | None = None) -> np.ndarray:
    """Per-row loss weights: the source's weight, times ``counts`` (e.g. annotators) over their
    source's mean where given (None entries count as the mean); normalised to mean 1."""
    sources = np.asarray(sources)
    w = np.asarray([float(weight_of[s]) for s in sources], dtype=np.float64)
    if counts is not None:
        c = np.asarray([np.nan if v is None else float(v) for v in counts], dtype=np.float64)
        for source in np.unique(sources):
            sel = sources == source
            finite = c[sel][np.isfinite(c[sel])]
            mean = finite.mean() if len(finite) else 1.0
            part = c[sel]
            w[sel] *= np.where(np.isfinite(part), part / mean, 1.0)
    if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
        raise LightningMetricsError("row weights must be finite, non-negative and not all zero")
    return w / w.mean()


def group_ids(*keys: Sequence) -> list[int]:
    """An integer per row for each distinct tuple of ``keys`` (first-seen order)."""
    seen: dict[tuple, int] = {}
    return [seen.setdefault(k, len(seen)) for k in zip(*keys)]


def check_source_names(sources: Sequence[RatingSource]) -> None:
    names = [s.label for s in sources]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(sources[0].path, f"rating sources need distinct names; {dupes} appear twice (set name: ...)")


def parallel_corpus(sources: Sequence, on_invalid: str = "error") -> dict[str, list[str]]:
    """The distinct (src, ref) pairs of several rating sources (their language-pair choices
    applied), first-seen order: the parallel corpus ``generate`` perturbs for synthetic
    pre-training of a source-aware model on the same data it is fine-tuned on."""
    from lightning_metrics.data.readers import read_rating_table

    pairs: dict[tuple[str, str], None] = {}
    for source in map(RatingSource.from_any, sources):
        rows = source.select(
            read_rating_table(source.path, columns=source.columns, required=("src", "ref"), on_invalid=on_invalid)
        )
        pairs.update(dict.fromkeys(zip(rows["src"], rows["ref"])))
    return {"src": [s for s, _ in pairs], "ref": [r for _, r in pairs]}
