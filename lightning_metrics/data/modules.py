"""Lightning data modules: human ratings (fine-tuning) and `generate` output (pre-training)."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

from lightning_metrics.baselines.signals import ALL_SIGNALS
from lightning_metrics.data.base import Batching, MetricDataModule, split_by_group
from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.data.sources import (
    NORMALISATIONS,
    RatingSource,
    check_source_names,
    group_ids,
    normalise_scores,
    row_weights,
)
from lightning_metrics.encoders.sequences import BatchLayout
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.tables import concat_tables, n_rows, take_rows


@dataclass(frozen=True)
class Split:
    """Without a ``val`` file, each rating source moves ``fraction`` of its rows to validation, whole
    groups of its ``by`` column (documents: ``lp`` + ``doc_id``; None: single rows)."""

    fraction: float = 0.1
    by: Optional[str] = "doc_id"


@dataclass(frozen=True)
class RatingOptions:
    """How rating tables are read: ``columns`` (the file's names for src, mt, ref, score, ...),
    ``on_invalid`` (``error`` or ``skip`` bad rows), ``normalise`` (``none``, ``z`` or ``rank`` per
    source and language pair, with training statistics; the given score is kept as ``score_raw``),
    ``weight_by`` (a count column, such as ``annotators``, that weights rows within their source)."""

    columns: Optional[dict] = None
    on_invalid: str = "error"
    normalise: str = "none"
    weight_by: Optional[str] = None


MOVED = {  # flat data key of earlier versions -> where it lives now (in RatingsDataModule and RankingDataModule)
    "val_fraction": "split.fraction",
    "val_split_by": "split.by",
    **{key: f"ratings.{key}" for key in ("columns", "on_invalid", "normalise", "weight_by")},
    **{key: f"batches.{key}" for key in ("batch_size", "num_workers", "max_length", "sampler")},
    **{key: f"pairs.{key}" for key in ("score_column", "threshold", "max_pairs_per_group")},
    "signal_encoder": "signals.encoder",
    "signal_layer": "signals.layer",
    "input_format": "layout.input_format",
    "text_fields": "layout.text_fields",
}


class RatingsDataModule(MetricDataModule):
    """Human ratings (DA z-scores, MQM, ...) for fine-tuning, from one table or several.

    ``train`` is a path, or a list of rating sources (``{path, name, columns, weight, split_by}``,
    see :class:`~lightning_metrics.data.sources.RatingSource`), read with the project's readers.
    Without ``val``, each source moves ``split.fraction`` of its rows to validation, whole groups
    of its ``split_by`` column (:class:`Split`), so no source segment is in both splits and every
    source keeps its share of the dev set. ``ratings`` (:class:`RatingOptions`) says how the tables
    are read, normalised and weighted. With several sources, language pairs are named ``source:lp``
    (validation logs each). ``shared`` are :class:`MetricDataModule`'s arguments (``encoder``,
    ``targets``, ``batches``, ``seed``, ``signals``, ``cache_dir``, ``layout``), declared there once.
    """

    def __init__(
        self,
        train: Union[str, list[Union[str, dict]]],
        val: Optional[str] = None,
        split: Split = Split(),
        ratings: RatingOptions = RatingOptions(),
        **shared,
    ):
        super().__init__(**shared)
        split = split if isinstance(split, Split) else Split(**dict(split))
        ratings = ratings if isinstance(ratings, RatingOptions) else RatingOptions(**dict(ratings))
        if isinstance(train, (list, tuple)):
            self.sources = [RatingSource.from_any(t) for t in train]
        else:
            self.sources = [RatingSource(path=str(train), columns=ratings.columns, split_by=split.by)]
        if not self.sources:
            raise LightningMetricsError("data.train lists no rating source")
        check_source_names(self.sources)
        self.source_names = [s.label for s in self.sources]
        for path in [s.path for s in self.sources] + ([val] if val is not None else []):
            if not Path(path).exists():
                raise InputError(path, "data file not found")
        if ratings.normalise not in NORMALISATIONS:
            raise LightningMetricsError(
                f"data.ratings.normalise must be one of {NORMALISATIONS}, got {ratings.normalise!r}"
            )
        self.train_path, self.val_path, self.val_fraction = self.sources[0].path, val, split.fraction
        self.columns, self.on_invalid = ratings.columns, ratings.on_invalid
        self.normalise, self.weight_by = ratings.normalise, ratings.weight_by

    def _read(self, path: str, columns: Optional[dict] = None) -> dict[str, list]:
        required = (*self.text_fields, *self.targets)
        return read_rating_table(
            path,
            columns=columns if columns is not None else self.columns,
            required=required,
            on_invalid=self.on_invalid,
        )

    def _split(self, source: RatingSource, rows: dict[str, list]) -> tuple[dict, dict]:
        n = n_rows(rows)
        if source.split_by is None:
            keys = [str(i) for i in range(n)]
        elif source.split_by not in rows:
            raise InputError(
                source.path,
                f"no column {source.split_by!r} to split validation by; give data.val, or set split_by (split.by) "
                "to null",
            )
        else:
            keys = [f"{lp}\t{doc}" for lp, doc in zip(rows.get("lp", [""] * n), rows[source.split_by])]
        train_idx, val_idx = split_by_group(keys, self.val_fraction, self.seed)
        if not train_idx:
            unit = f"{len(set(keys))} document(s) ({source.split_by})" if source.split_by else f"{n} row(s)"
            raise InputError(
                source.path,
                f"the validation split took all {unit}: nothing is left to train on; give a separate "
                "data.val file or split by another column (split_by); data.split.fraction helps only with more "
                "documents",
            )
        return take_rows(rows, train_idx), take_rows(rows, val_idx)

    def _load(self) -> None:
        several = len(self.sources) > 1
        parts = []
        for source in self.sources:
            rows = source.select(self._read(source.path, source.columns))
            n = n_rows(rows)
            rows["source"] = [source.label] * n
            if several:  # one language pair in two sources is two groups
                rows["lp"] = [f"{source.label}:{lp}" for lp in rows.get("lp", ["all"] * n)]
            if self.weight_by is not None:
                rows["_count"] = rows.get(self.weight_by, [None] * n)
            if self.val_path is None:
                parts.append(self._split(source, rows))
            else:
                parts.append((rows, {}))
        self.train_rows = concat_tables([p[0] for p in parts])
        self.val_rows = self._read(self.val_path) if self.val_path is not None else concat_tables([p[1] for p in parts])
        if self.val_path is not None:
            self.val_rows["source"] = [self.sources[0].label] * n_rows(self.val_rows)
        self._prepare_targets()

    def _prepare_targets(self) -> None:
        train, val = self.train_rows, self.val_rows
        n_train = n_rows(train)
        groups = lambda rows: [f"{s}\t{lp}" for s, lp in zip(rows["source"], rows.get("lp", ["all"] * n_rows(rows)))]  # noqa: E731
        if self.normalise != "none" and "score" in train:
            pooled = {g: g.split("\t")[0] for g in groups(train) + groups(val)}
            train_raw, train_groups = list(train["score"]), groups(train)
            for rows in (train, val):
                rows["score_raw"] = list(rows["score"])
                rows["score"] = normalise_scores(
                    rows["score_raw"], groups(rows), self.normalise, train_raw, train_groups, pooled
                ).tolist()
        weights = {s.label: s.weight for s in self.sources}
        train["weight"] = row_weights(train["source"], weights, train.pop("_count", None)).tolist()
        val.pop("_count", None)
        for rows in (train, val):
            rows["source_id"] = [self.source_names.index(s) for s in rows["source"]]
        key = "src" if "src" in train else "ref"
        if key in train:
            ids = group_ids(
                [*train["source"], *val["source"]],
                [*train.get("lp", [""] * n_train), *val.get("lp", [""] * n_rows(val))],
                [*train[key], *val[key]],
            )
            train["group"], val["group"] = ids[:n_train], ids[n_train:]

    def summary(self) -> dict:
        out = super().summary()
        count = lambda rows, name: sum(1 for s in rows.get("source", []) if s == name)  # noqa: E731
        out["sources"] = [
            {
                "name": s.label,
                "path": s.path,
                "weight": s.weight,
                "train_rows": count(self.train_rows, s.label),
                "val_rows": count(self.val_rows, s.label),
            }
            for s in self.sources
        ]
        out["normalise"], out["weight_by"] = self.normalise, self.weight_by
        return out


def generate_files(data: str) -> list[str]:
    """The Parquet shards of a ``generate`` output folder (or a glob of them), sorted."""
    return sorted(glob.glob(str(Path(data) / "data-*.parquet"))) if Path(data).is_dir() else sorted(glob.glob(data))


def read_generate_output(data: str, max_rows: Optional[int] = None) -> dict[str, list]:
    """All rows of ``generate`` output (a folder or a glob of ``data-*.parquet``) as columns."""
    import pyarrow.parquet as pq

    files = generate_files(data)
    if not files:
        raise InputError(data, "no generate output here (expected data-*.parquet files)")
    tables = [pq.read_table(f).to_pydict() for f in files]
    rows = {k: [v for t in tables for v in t[k]] for k in tables[0]}
    return rows if max_rows is None else {k: v[:max_rows] for k, v in rows.items()}


PRETRAIN_TARGETS = ("score", *ALL_SIGNALS)


class PretrainDataModule(MetricDataModule):
    """The Parquet shards ``generate`` writes; validation holds out ``val_fraction`` of the reference
    sentences, whole. The other arguments are :class:`MetricDataModule`'s."""

    def __init__(
        self,
        data: str,
        val_fraction: float = 0.05,
        max_rows: Optional[int] = None,
        encoder: str = "default",
        targets: Sequence[str] = PRETRAIN_TARGETS,
        batches: Batching = Batching(),
        seed: int = 0,
        layout: BatchLayout = BatchLayout(),
    ):
        super().__init__(encoder, targets, batches, seed, layout=layout)
        if not generate_files(data):
            raise InputError(data, "no generate output here (expected data-*.parquet files)")
        self.data, self.val_fraction, self.max_rows = data, val_fraction, max_rows

    def _load(self) -> None:
        rows = read_generate_output(self.data, self.max_rows)
        missing = [f for f in self.text_fields if f not in rows]
        if missing:
            raise InputError(
                self.data,
                f"this model reads {list(self.text_fields)} but the generate output has no {missing} (run generate on "
                "a parallel corpus for src)",
            )
        train_idx, val_idx = split_by_group([str(x) for x in rows["sentence_id"]], self.val_fraction, self.seed)
        self.train_rows, self.val_rows = take_rows(rows, train_idx), take_rows(rows, val_idx)
