"""Lightning data modules: human ratings (fine-tuning) and `generate` output (pre-training)."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Optional, Sequence, Union

from lightning_metrics.data.base import MetricDataModule, split_by_group
from lightning_metrics.data.readers import read_rating_table
from lightning_metrics.data.sources import (
    NORMALISATIONS,
    RatingSource,
    check_source_names,
    group_ids,
    normalise_scores,
    row_weights,
)
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.signals import ALL_SIGNALS
from lightning_metrics.tables import concat_tables, n_rows, take_rows


class RatingsDataModule(MetricDataModule):
    """Human ratings (DA z-scores, MQM, ...) for fine-tuning, from one table or several.

    ``train`` is a path, or a list of rating sources (``{path, name, columns, weight, split_by}``,
    see :class:`~lightning_metrics.data.sources.RatingSource`), read with the project's readers.
    Without ``val``, each source moves ``val_fraction`` of its rows to validation, whole groups
    of its ``split_by`` column (documents: ``lp`` + ``doc_id``), so no source segment is in both
    splits and every source keeps its share of the dev set.

    - ``normalise``: ``none``, ``z`` or ``rank`` per (source, language pair), with training
      statistics (:func:`~lightning_metrics.data.sources.normalise_scores`); the given score is
      kept as ``score_raw``.
    - ``weight_by``: a count column (``annotators``) that weights rows within their source.
    - ``sampler``: ``length`` (length-bucketed batches) or ``source`` (the outputs of one source
      together, which pairwise losses need).

    With several sources, language pairs are named ``source:lp`` (validation logs each).
    """

    def __init__(
        self,
        train: Union[str, list[Union[str, dict]]],
        val: Optional[str] = None,
        val_fraction: float = 0.1,
        val_split_by: Optional[str] = "doc_id",
        columns: Optional[dict] = None,
        on_invalid: str = "error",
        normalise: str = "none",
        weight_by: Optional[str] = None,
        sampler: str = "length",
        encoder: str = "default",
        targets: Sequence[str] = ("score",),
        batch_size: int = 16,
        num_workers: int = 0,
        max_length: int = 256,
        seed: int = 0,
        signals: Optional[list[str]] = None,
        signal_encoder: str = "default",
        signal_layer: Optional[int] = None,
        cache_dir: Optional[str] = None,
        input_format: str = "cross",
        text_fields: Sequence[str] = ("mt", "ref"),
    ):
        super().__init__(
            encoder,
            targets,
            batch_size,
            num_workers,
            max_length,
            seed,
            sampler,
            signals,
            signal_encoder,
            signal_layer,
            cache_dir,
            input_format,
            text_fields,
        )
        if isinstance(train, (list, tuple)):
            self.sources = [RatingSource.from_any(t) for t in train]
        else:
            self.sources = [RatingSource(path=str(train), columns=columns, split_by=val_split_by)]
        if not self.sources:
            raise LightningMetricsError("data.train lists no rating source")
        check_source_names(self.sources)
        self.source_names = [s.label for s in self.sources]
        for path in [s.path for s in self.sources] + ([val] if val is not None else []):
            if not Path(path).exists():
                raise InputError(path, "data file not found")
        if normalise not in NORMALISATIONS:
            raise LightningMetricsError(f"data.normalise must be one of {NORMALISATIONS}, got {normalise!r}")
        self.train_path, self.val_path, self.val_fraction = self.sources[0].path, val, val_fraction
        self.columns, self.on_invalid, self.normalise, self.weight_by = columns, on_invalid, normalise, weight_by

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
                f"no column {source.split_by!r} to split validation by; give data.val, or set split_by (val_split_by) "
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
                "data.val file or split by another column (split_by); data.val_fraction helps only with more documents",
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
    """The Parquet shards ``generate`` writes; validation holds out whole reference sentences."""

    def __init__(
        self,
        data: str,
        val_fraction: float = 0.05,
        encoder: str = "default",
        targets: Sequence[str] = PRETRAIN_TARGETS,
        batch_size: int = 16,
        num_workers: int = 0,
        max_length: int = 256,
        seed: int = 0,
        max_rows: Optional[int] = None,
        input_format: str = "cross",
        text_fields: Sequence[str] = ("mt", "ref"),
    ):
        super().__init__(
            encoder,
            targets,
            batch_size,
            num_workers,
            max_length,
            seed,
            input_format=input_format,
            text_fields=text_fields,
        )
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
