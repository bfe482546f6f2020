"""What the benchmark scripts share, written once: the offline environment, the data paths, one score
cache, fit-and-export through the command line, and running a peer in its own venv.

Import it before anything of the project (``import common``, or from ``benchmarks/gpu/``, after
putting ``benchmarks/`` on the path): it sets the offline variables before transformers is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}
for _name, _value in OFFLINE.items():
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
DA = SHARED / "wmt21_da_toen.csv"
NEWS = SHARED / "wmt21_mqm_newstest.csv"
TED = SHARED / "wmt21_mqm_ted.csv"
PEERS = REPO / "benchmarks" / "peers"
PEER_PYTHON = str(REPO / ".venv-comet" / "bin" / "python")  # made by `make peer-venv`


def cached_scores(spec: str, rows: dict, cache: Path, name: str | None = None, **score) -> np.ndarray:
    """Segment scores of a metric spec on ``rows`` (mt, ref[, src]), kept as ``cache/<name>.npy``.

    One rule decides whether the cache holds: the file must be newer than the metric, where the
    metric is an export folder (its manifest, which every export writes last); a built-in never
    changes. ``score`` goes to :func:`lightning_metrics.metrics.score_many` (``num_proc``, ``options``,
    ...; by default every core and no progress bars).
    """
    from lightning_metrics.encoders.inference import ScoreOptions
    from lightning_metrics.metrics import parse_spec, score_many
    from lightning_metrics.storage.artifact import MANIFEST

    parsed = parse_spec(spec)
    path = cache / f"{name or safe_name(parsed.label)}.npy"
    made = (Path(parsed.folder) / MANIFEST).stat().st_mtime if parsed.folder else 0.0
    if path.is_file() and path.stat().st_mtime > made:
        return np.load(path)
    score = {"num_proc": os.cpu_count() or 1, "options": ScoreOptions(device="cpu", progress=False), **score}
    values = score_many([spec], rows["mt"], rows["ref"], rows.get("src"), **score)[parsed.label]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.asarray(values, dtype=float))
    return np.asarray(values, dtype=float)


def safe_name(label: str) -> str:
    """A file name for a metric label: its folder's name, or the spec with path characters replaced."""
    text = Path(label).name if os.sep in label and Path(label).exists() else label
    return "".join(c if c.isalnum() or c in "._=-," else "_" for c in text)


def paired_kendall(a: np.ndarray, b: np.ndarray, human, n: int, seed: int, clusters=None) -> dict:
    """Kendall of ``a`` and its change over ``b``'s on the same rows, each with a 95% bootstrap interval
    (``n`` resamples, the same draw for both): ``kendall``, ``ci``, ``change``, ``change_ci``. The
    resamples draw rows, or with ``clusters`` (a document or source id per row) whole clusters: the rows
    of one document are not independent, and a row bootstrap makes their intervals too narrow."""
    from lightning_metrics.correlation import kendall, resample_rows

    a, b, human = np.asarray(a, dtype=float), np.asarray(b, dtype=float), np.asarray(human, dtype=float)
    draws = np.array(
        [
            (kendall(a[idx], human[idx]), kendall(b[idx], human[idx]))
            for idx in resample_rows(len(human), n, seed, clusters)
        ]
    )
    value = kendall(a, human)
    return {
        "kendall": float(value),
        "ci": np.percentile(draws[:, 0], [2.5, 97.5]).tolist(),
        "change": float(value - kendall(b, human)),
        "change_ci": np.percentile(draws[:, 0] - draws[:, 1], [2.5, 97.5]).tolist(),
        "resampled": "rows" if clusters is None else f"{len(set(clusters))} clusters",
    }


def digest(config: dict) -> str:
    """A short hash of a config, for run folders that change when the config does."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]


def fit_config(config: dict, run_dir: Path, label: str = "fit") -> tuple[Path, float]:
    """``lightning-metrics fit`` on ``config`` in a subprocess; returns ``(export folder, seconds)``.

    The run writes into ``run_dir``: its config, ``fit.log``, CSV logs, and ``export/`` (the config's
    ExportBest, added when it has none). A run whose export exists is reused, with its recorded seconds.
    """
    from lightning_metrics.storage.artifact import is_exported

    export, seconds_file = run_dir / "export", run_dir / "seconds.txt"
    if is_exported(export):
        return export, float(seconds_file.read_text()) if seconds_file.is_file() else float("nan")
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = config.setdefault("trainer", {})
    trainer["default_root_dir"] = str(run_dir)
    trainer["logger"] = [{"class_path": "pytorch_lightning.loggers.CSVLogger", "init_args": {"save_dir": str(run_dir)}}]
    callbacks = trainer.setdefault("callbacks", [])
    exporters = [c for c in callbacks if c["class_path"].endswith("ExportBest")]
    if not exporters:
        callbacks.append({"class_path": "lightning_metrics.training.ExportBest", "init_args": {}})
        exporters = callbacks[-1:]
    exporters[0].setdefault("init_args", {})["out"] = str(export)
    path = run_dir / "config.yaml"
    path.write_text(json.dumps(config, indent=1), encoding="utf-8")  # JSON is YAML
    print(f"{label}: {run_dir / 'fit.log'}", flush=True)
    start = time.perf_counter()
    with (run_dir / "fit.log").open("w") as log:
        command = [sys.executable, "-m", "lightning_metrics.cli", "fit", "--config", str(path)]
        failed = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT).returncode != 0
    if failed or not is_exported(export):
        raise SystemExit(f"{label} failed: see {run_dir / 'fit.log'}")
    seconds = time.perf_counter() - start
    seconds_file.write_text(f"{seconds:.1f}\n")
    return export, seconds


def run_peer(script: str, args: list[str], python: str = PEER_PYTHON, path: str | None = None) -> dict:
    """``benchmarks/peers/SCRIPT ARGS`` with the peer's python (offline, ``path`` as its PYTHONPATH);
    the JSON object its last line prints. A failure stops the benchmark with the peer's stderr."""
    env = {**os.environ, **OFFLINE}
    if path:
        env["PYTHONPATH"] = path
    proc = subprocess.run([python, str(PEERS / script), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the peer failed ({script} {' '.join(args[:1])}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
