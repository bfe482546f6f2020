"""Ensembles: one metric folder that scores with several metrics and averages them.

Each member's scores are standardised with the mean and standard deviation of that member's
scores on a table of training ratings (``--data`` at export), so a member on a 0-100 scale
(chrF) and one on a z-score scale weigh alike; the ensemble's score is the weighted mean of
the standardised scores. Members are exported metric folders (copied into ``members/``) or
built-in metrics with their options. Built-in members of one family (BERTScore P/R/F) are
computed once, and learned members whose encoders hold the same weights embed each sentence once.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np
import yaml

from lightning_metrics import __version__
from lightning_metrics.artifact import Export, is_exported, write_export
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.metrics.base import Metric, Signature
from lightning_metrics.metrics.builtin import builtin, builtin_scores, canonical_name
from lightning_metrics.tables import take_rows

FAMILY = "Ensemble"
MEMBERS = "members"


class Ensemble(Metric):
    """Weighted mean of standardised member scores (see the module docstring)."""

    def __init__(
        self,
        name: str,
        members: Sequence[tuple[str, Metric, dict]],
        stats: Sequence[dict],
        weights: Sequence[float],
        short_hash: str = "none",
    ):
        if not members:
            raise LightningMetricsError("an ensemble needs at least one member")
        self.name, self.members, self.stats, self.short_hash = name, list(members), list(stats), short_hash
        self.weights = np.asarray(weights, dtype=np.float64) / np.sum(weights)
        self.inputs = tuple(f for f in ("src", "mt", "ref") if any(f in m.inputs for _, m, _ in self.members))
        _share_embeddings([m for _, m, _ in self.members])

    @classmethod
    def from_export(cls, export: Export, max_length: int | None = None, precision: str | None = "auto") -> "Ensemble":
        from lightning_metrics.metrics import load_metric

        members = []
        for spec in export.meta.get("members", []):
            if spec.get("kind") == "export":
                members.append(
                    (
                        spec["label"],
                        load_metric(str(export.file(spec["path"])), max_length=max_length, precision=precision),
                        spec,
                    )
                )
            else:
                members.append((spec["label"], builtin(spec["name"], **spec.get("options", {})), spec))
        return cls(export.path.name, members, export.meta["stats"], export.meta["weights"], export.short_hash)

    @property
    def signature(self) -> Signature:
        labels = "+".join(label for label, _, _ in self.members)
        return Signature.of(self.name, hash=self.short_hash, family=FAMILY, members=labels, system="mean")

    def member_scores(
        self,
        columns: dict[str, list[str]],
        batch_size: int | None = None,
        device: str = "cpu",
        devices: int = 1,
        progress: bool | None = None,
    ) -> dict[str, np.ndarray]:
        """Each member's raw segment scores, built-in families computed once."""
        out: dict[str, np.ndarray] = {}
        plain = [
            (label, spec)
            for label, metric, spec in self.members
            if spec.get("kind") == "builtin" and not spec.get("options")
        ]
        if plain:
            values = builtin_scores(
                [spec["name"] for _, spec in plain], columns["mt"], columns["ref"], device=device, progress=progress
            )
            out.update({label: np.asarray(values[spec["name"]]) for label, spec in plain})
        for label, metric, _ in self.members:
            if label not in out:
                given = {f: columns.get(f) for f in ("mt", "ref", "src")}
                out[label] = np.asarray(
                    metric.score(
                        **given, batch_size=batch_size, device=device, devices=devices, progress=progress
                    ).scores
                )
        return out

    def standardised(self, raw: dict[str, np.ndarray]) -> np.ndarray:
        """``[n_members, n]`` member scores, each standardised with its stored statistics."""
        return np.stack([(raw[label] - s["mean"]) / s["std"] for (label, _, _), s in zip(self.members, self.stats)])

    def segment_scores(self, columns, batch_size=None, device="cpu", devices=1, progress=None) -> list[float]:
        z = self.standardised(self.member_scores(columns, batch_size, device, devices, progress))
        return (self.weights @ z).tolist()


def _share_embeddings(metrics: Sequence[Metric]) -> None:
    """Learned sentence-embedding members whose encoders hold the same weights share one embedding cache."""
    from lightning_metrics.metrics.learned import LearnedMetric

    caches: dict[str, dict] = {}
    for metric in metrics:
        if isinstance(metric, LearnedMetric) and metric.model.input_format == "sentences":
            metric.shared_embeddings = caches.setdefault(metric.encoder_key(), {})


def member_spec(name: str, index: int) -> dict:
    """What the metadata records for one member given on the command line: a folder (labelled by its
    name, or ``LABEL=FOLDER``), or a built-in name with optional options,
    ``bertscore:model=multilingual-e5-small,layer=7`` (values read as YAML)."""
    label, folder = Path(name).name, name
    if not is_exported(name) and "=" in name and ":" not in name:  # LABEL=FOLDER
        label, _, folder = name.partition("=")
        if not is_exported(folder):
            raise LightningMetricsError(f"ensemble member {name!r}: {folder!r} is not an exported metric folder")
        if not re.fullmatch(r"[A-Za-z0-9][\w.+-]*", label):
            raise LightningMetricsError(f"ensemble member {name!r}: a label is letters, digits and . _ + -")
    if is_exported(folder):
        return {"kind": "export", "source": str(folder), "label": label, "path": f"{MEMBERS}/{index}-{label}"}
    base, _, given = name.partition(":")
    options = {}
    for item in filter(None, given.split(",")):
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise LightningMetricsError(f"ensemble member {name!r}: options are key=value, separated by commas")
        options[key.strip()] = yaml.safe_load(value)
    canonical = canonical_name(base)
    builtin(canonical, **options)  # unknown names and options fail here, in one line
    return {"kind": "builtin", "name": canonical, "label": name, "options": options}


def export_ensemble(
    members: Sequence[str],
    out: str | Path,
    data,
    weights: Sequence[float] | None = None,
    force: bool = False,
    max_rows: int = 5000,
    seed: int = 0,
    device: str = "cpu",
    progress: bool | None = None,
) -> Path:
    """Write an ensemble folder of ``members`` (export folders and/or built-in names).

    ``data`` (a ratings table with the fields the members read) gives each member's
    standardisation: the mean and std of its scores on up to ``max_rows`` seeded rows.
    """
    from lightning_metrics.metrics import load_metric

    specs = [member_spec(m, i) for i, m in enumerate(members)]
    labels = [s["label"] for s in specs]
    if len(set(labels)) != len(labels):
        raise LightningMetricsError(
            f"ensemble members need distinct names, got {labels}: label a folder as NAME=FOLDER"
        )
    weights = [1.0] * len(specs) if weights is None else [float(w) for w in weights]
    if len(weights) != len(specs) or min(weights) < 0 or sum(weights) <= 0:
        raise LightningMetricsError(
            f"give one non-negative weight per member ({len(specs)}), not all zero; got {weights}"
        )
    loaded = [
        (s["label"], load_metric(s["source"]) if s["kind"] == "export" else builtin(s["name"], **s["options"]), s)
        for s in specs
    ]
    probe = Ensemble(Path(out).name, loaded, [{"mean": 0.0, "std": 1.0}] * len(specs), weights)
    columns = _sample(data, probe.inputs, max_rows, seed)
    raw = probe.member_scores(columns, device=device, progress=progress)
    stats = []
    for label in labels:
        std = float(np.std(raw[label]))
        if not np.isfinite(std) or std <= 0:
            raise LightningMetricsError(f"member {label} gives constant scores on the data: it cannot be standardised")
        stats.append({"mean": float(np.mean(raw[label])), "std": std})
    meta = {
        "family": FAMILY,
        "inputs": list(probe.inputs),
        "framework_version": __version__,
        "members": [{k: v for k, v in s.items() if k != "source"} for s in specs],
        "stats": stats,
        "weights": weights,
        "stats_data": {"rows": len(columns["mt"]), "seed": seed},
    }

    def fill(folder: Path) -> None:
        for spec in specs:
            if spec["kind"] == "export":
                shutil.copytree(spec["source"], folder / spec["path"])

    return write_export(out, meta, fill, ensemble_card(Path(out).name, meta), force=force)


def _sample(data, fields: Sequence[str], max_rows: int, seed: int) -> dict[str, list[str]]:
    from lightning_metrics.data.readers import read_rating_table

    table = read_rating_table(str(data), required=tuple(fields)) if isinstance(data, (str, Path)) else dict(data)
    missing = [f for f in fields if f not in table]
    if missing:
        raise InputError(
            str(data) if isinstance(data, (str, Path)) else "data", f"the members read {missing}, which the data lacks"
        )
    n = len(table["mt"])
    pick = np.sort(np.random.default_rng(seed).permutation(n)[:max_rows]) if n > max_rows else np.arange(n)
    return take_rows({f: table[f] for f in fields}, pick)


def ensemble_card(name: str, meta: dict) -> str:
    lines = [
        f"- **{m['label']}** ({'exported metric' if m['kind'] == 'export' else 'built-in'}): weight {w:g}, "
        "standardised with mean "
        f"{s['mean']:.4f}, std {s['std']:.4f}"
        for m, s, w in zip(meta["members"], meta["stats"], meta["weights"])
    ]
    return "\n".join(
        [
            f"# {name}",
            "",
            f"An ensemble metric exported by lightning-metrics {meta['framework_version']}: the weighted mean of its "
            "members'",
            f"standardised scores (statistics from {meta['stats_data']['rows']} rows of training ratings).",
            "",
            *lines,
            "",
            "Every file of this folder (the members' included) is listed with its sha256 in `manifest.json`",
            "and checked when it loads; edit nothing here.",
            "",
        ]
    )
