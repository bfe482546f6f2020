"""Relative-ranking data for :class:`~lightning_metrics.models.CometRanker`.

Rows are ``(src, ref, pos, neg)``: ``pos`` is the output humans (or the perturbation severity)
prefer. They come from a table that already has ``pos``/``neg`` columns, or are derived:

- from DA ratings: two outputs for the same source whose ``raw`` scores differ by more than
  ``threshold`` (25 in WMT's DARR);
- from ``generate`` output of a parallel corpus: two candidates from the same reference whose
  ``score`` (1 - severity) differs by more than ``threshold`` (e.g. 0.1).

Splitting happens on the rated rows, by document (or ``sentence_id``), *before* pairs are
formed, so no pair mixes training and validation sentences.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from lightning_metrics.data.base import Batching
from lightning_metrics.data.modules import RatingOptions, RatingsDataModule, Split, read_generate_output
from lightning_metrics.data.readers import check_table, read_table
from lightning_metrics.encoders.sequences import BatchLayout
from lightning_metrics.errors import InputError, LightningMetricsError

PAIR_FIELDS = ("src", "ref", "pos", "neg")


def darr_pairs(
    rows: dict[str, list], score_column: str = "raw", threshold: float = 25.0
) -> dict[tuple, list[tuple[int, int]]]:
    """WMT's DARR pairs as row indices: per ``(lp, src, ref)``, ``(better, worse)`` for every two
    different outputs whose ``score_column`` differs by more than ``threshold``."""
    n = len(rows["mt"])
    lps = rows.get("lp", [""] * n)
    refs = rows.get("ref", [""] * n)
    groups: dict[tuple, list[int]] = {}
    for i in range(n):
        groups.setdefault((lps[i], rows["src"][i], refs[i]), []).append(i)
    scores, mts = rows[score_column], rows["mt"]
    out: dict[tuple, list[tuple[int, int]]] = {}
    for key, members in groups.items():
        pairs = []
        for a_pos, a in enumerate(members):
            for b in members[a_pos + 1 :]:
                if abs(scores[a] - scores[b]) > threshold and mts[a] != mts[b]:
                    pairs.append((a, b) if scores[a] > scores[b] else (b, a))
        if pairs:
            out[key] = pairs
    return out


def relative_ranks(
    rows: dict[str, list],
    score_column: str = "raw",
    threshold: float = 25.0,
    max_pairs_per_group: Optional[int] = None,
    seed: int = 0,
) -> dict[str, list]:
    """Better/worse pairs among outputs that share ``(lp, src, ref)`` and differ by more than ``threshold``.

    Pairs of identical outputs are skipped. ``max_pairs_per_group`` keeps a seeded sample per
    group. The result has ``src, ref, pos, neg`` (and ``lp`` when the rows have one).
    """
    rng = np.random.default_rng(seed)
    out: dict[str, list] = {k: [] for k in (*PAIR_FIELDS, *(("lp",) if "lp" in rows else ()))}
    mts = rows["mt"]
    for (lp, src, ref), pairs in darr_pairs(rows, score_column, threshold).items():
        if max_pairs_per_group is not None and len(pairs) > max_pairs_per_group:
            pairs = [pairs[k] for k in sorted(rng.choice(len(pairs), max_pairs_per_group, replace=False))]
        for better, worse in pairs:
            out["src"].append(src)
            out["ref"].append(ref)
            out["pos"].append(mts[better])
            out["neg"].append(mts[worse])
            if "lp" in out:
                out["lp"].append(lp)
    return out


@dataclass(frozen=True)
class Pairs:
    """How relative ranks are made from ratings: two outputs of one source whose ``score_column``
    differs by more than ``threshold`` make a (better, worse) pair; ``max_pairs_per_group`` caps a source's."""

    score_column: str = "raw"
    threshold: float = 25.0
    max_pairs_per_group: Optional[int] = None


class RankingDataModule(RatingsDataModule):
    """Relative-ranking tuples for the ranking model (see the module docstring for sources).

    ``train``/``val`` are tables (ratings or pairs) or ``generate`` output folders; without ``val``,
    ``split.fraction`` of the rated rows is held out by ``split.by`` before pairing (:class:`Pairs`
    says how pairs are made). The other arguments are :class:`RatingsDataModule`'s.
    """

    def __init__(
        self,
        train: str,
        val: Optional[str] = None,
        split: Split = Split(),
        pairs: Pairs = Pairs(),
        ratings: RatingOptions = RatingOptions(),
        encoder: str = "default",
        batches: Batching = Batching(),
        seed: int = 0,
        layout: BatchLayout = BatchLayout("sentences", PAIR_FIELDS),
    ):
        layout = layout if isinstance(layout, BatchLayout) else BatchLayout(**dict(layout))
        if (layout.input_format, layout.text_fields) != ("sentences", PAIR_FIELDS):
            raise LightningMetricsError(
                f"RankingDataModule makes sentences batches of {list(PAIR_FIELDS)}, for CometRanker; "
                f"the model reads {layout.input_format} batches of {list(layout.text_fields)}"
            )
        super().__init__(
            train, val, split, ratings, encoder=encoder, targets=(), batches=batches, seed=seed, layout=layout
        )
        pairs = pairs if isinstance(pairs, Pairs) else Pairs(**dict(pairs))
        self.score_column, self.threshold, self.max_pairs_per_group = (
            pairs.score_column,
            pairs.threshold,
            pairs.max_pairs_per_group,
        )
        self._paired = False

    def _read(self, path: str, columns: Optional[dict] = None) -> dict[str, list]:
        columns = columns if columns is not None else self.columns
        if Path(path).is_dir() and glob.glob(str(Path(path) / "data-*.parquet")):
            table = read_generate_output(path)
            if "src" not in table:
                raise InputError(
                    path, "ranking needs sources: run generate on a parallel corpus (a table with src and ref columns)"
                )
        else:
            table = read_table(path, columns)
        self._paired = {"pos", "neg"} <= set(table)
        required: Sequence[str] = PAIR_FIELDS if self._paired else ("src", "mt", "ref", self.score_column)
        return check_table(path, table, required, self.on_invalid, columns)

    def _load(self) -> None:
        super()._load()
        if not self._paired:
            self.train_rows = relative_ranks(
                self.train_rows, self.score_column, self.threshold, self.max_pairs_per_group, self.seed
            )
            self.val_rows = relative_ranks(
                self.val_rows, self.score_column, self.threshold, self.max_pairs_per_group, self.seed
            )
            for name, rows in (("training", self.train_rows), ("validation", self.val_rows)):
                if not rows["pos"]:
                    raise InputError(
                        self.train_path,
                        f"no {name} pairs: no two outputs of one source differ by more than {self.threshold} in "
                        f"{self.score_column!r}",
                    )
