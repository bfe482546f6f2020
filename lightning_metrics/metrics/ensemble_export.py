"""Writing an ensemble folder (``lightning-metrics export --ensemble``): each member's scores on a
table of ratings give its standardisation; the folder holds the exported members' own folders
(see :mod:`~lightning_metrics.metrics.ensemble` for how it scores)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from lightning_metrics.encoders.inference import ScoreOptions
from lightning_metrics.errors import InputError, LightningMetricsError
from lightning_metrics.metrics.builtin import builtin
from lightning_metrics.metrics.ensemble import FAMILY, MEMBERS, Ensemble
from lightning_metrics.metrics.spec import parse_spec, short_label
from lightning_metrics.storage.artifact import write_export
from lightning_metrics.tables import take_rows
from lightning_metrics.version import __version__


def member_spec(text: str, index: int) -> dict:
    """What the metadata records for one member, given as a metric spec (:mod:`.spec`): a folder
    (labelled by its name, or ``LABEL=FOLDER``), or a built-in with its options
    (``bertscore:model=multilingual-e5-small,layer=7``)."""
    spec = parse_spec(text)
    if spec.is_builtin:
        return {"kind": "builtin", "name": spec.name, "label": spec.label, "options": spec.options}
    label = short_label(spec)
    return {"kind": "export", "source": spec.folder, "label": label, "path": f"{MEMBERS}/{index}-{label}"}


def export_ensemble(
    members: Sequence[str],
    out: str | Path,
    data,
    weights: Sequence[float] | None = None,
    force: bool = False,
    max_rows: int = 5000,
    seed: int = 0,
    options: ScoreOptions | None = None,
) -> Path:
    """Write an ensemble folder of ``members`` (export folders and/or built-in names).

    ``data`` (a ratings table with the fields the members read) gives each member's
    standardisation: the mean and std of its scores on up to ``max_rows`` seeded rows.
    """
    from lightning_metrics.metrics.loading import load_metric

    specs = [member_spec(m, i) for i, m in enumerate(members)]
    labels = [s["label"] for s in specs]
    if len(set(labels)) != len(labels):
        raise LightningMetricsError(
            f"ensemble members need distinct names, got {labels}: label one as NAME=FOLDER (or NAME=SPEC)"
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
    raw = probe.member_scores(columns, (options or ScoreOptions()).on_device())
    meta = {
        "family": FAMILY,
        "inputs": list(probe.inputs),
        "framework_version": __version__,
        "members": [{k: v for k, v in s.items() if k != "source"} for s in specs],
        "stats": [standardisation(label, raw[label]) for label in labels],
        "weights": weights,
        "stats_data": {"rows": len(columns["mt"]), "seed": seed},
    }

    def fill(folder: Path) -> None:
        for spec in specs:
            if spec["kind"] == "export":
                shutil.copytree(spec["source"], folder / spec["path"])

    return write_export(out, meta, fill, ensemble_card(Path(out).name, meta), force=force)


def standardisation(label: str, scores) -> dict:
    """The mean and standard deviation a member's scores are standardised with; constant scores are one line."""
    std = float(np.std(scores))
    if not np.isfinite(std) or std <= 0:
        raise LightningMetricsError(f"member {label} gives constant scores on the data: it cannot be standardised")
    return {"mean": float(np.mean(scores)), "std": std}


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
