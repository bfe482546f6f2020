"""Imports score like the peers: every supported class, trained by the peer's own code, imported, scored.

    .venv/bin/python benchmarks/import_parity.py [--peer-python .venv-comet/bin/python] [--steps 4]
        [--rows 32] [--out runs/import_parity] [--seed 0] [--metricx PATH_TO_METRICX]

For each COMET class and setting below (the unified ``UnifiedMetric`` and ``XCOMETMetric`` included, whose
error spans must also be identical), and for BLEURT, on a tiny random BERT and on the default
encoder (all-MiniLM-L6-v2): the peer (``benchmarks/peers/import_peer.py``, in the peer venv of
``make peer-venv``) trains a checkpoint for a few steps, saves it in its own layout and prints its
``predict`` scores on real WMT rows; ``lightning-metrics import`` turns the checkpoint into an export
and ``load_metric(...).score`` scores the same rows in fp32. The table gives the largest absolute
difference per case, apart for the rows longer than the import's ``max_length`` (cut: a pair is cut
as BERT and BLEURT cut it, the second side on a tie, see ``data.batching.encode_pairs``); the target
is at most 1e-5, and the script exits 1 if any case misses it. With ``--metricx`` (google-research/metricx's
code), tiny MetricX-23 and -24 checkpoints in every mode are scored by its own ``predict`` too
(``metricx_parity.py``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import common  # the offline environment, before anything loads transformers
from results_doc import machine, publish

REPO = common.REPO
sys.path.insert(0, str(REPO / "tests"))

TARGET = 1e-5
HEAD = {"hidden_sizes": [64, 32], "activations": "Tanh", "dropout": 0.1}
COMET_CASES = {
    "RegressionMetric, softmax mix, avg": {
        "class": "regression_metric",
        "layer": "mix",
        "layer_transformation": "softmax",
        "layer_norm": False,
        "pool": "avg",
        **HEAD,
    },
    "RegressionMetric, sparsemax mix + layer norm, max, sigmoid": {
        "class": "regression_metric",
        "layer": "mix",
        "layer_transformation": "sparsemax",
        "layer_norm": True,
        "pool": "max",
        **HEAD,
        "final_activation": "Sigmoid",
    },
    "RegressionMetric, layer 1, cls": {"class": "regression_metric", "layer": 1, "pool": "cls", **HEAD},
    "ReferencelessRegression, softmax mix + layer norm, avg": {
        "class": "referenceless_regression_metric",
        "layer": "mix",
        "layer_transformation": "softmax",
        "layer_norm": True,
        "pool": "avg",
        **HEAD,
    },
    "RankingMetric, sparsemax mix, avg": {
        "class": "ranking_metric",
        "layer": "mix",
        "layer_transformation": "sparsemax",
        "layer_norm": False,
        "pool": "avg",
        "dropout": 0.1,
    },
}


UNIFIED = {"hidden_sizes": [64, 32], "activations": "Tanh", "dropout": 0.1, "sent_layer": "mix"}
UNIFIED_CASES = {  # the three kinds of unified checkpoint
    "UnifiedMetric, CometKiwi layout [mt, src]": {
        "class": "unified_metric",
        "input_segments": ["mt", "src"],
        "word_level_training": False,
        "layer_transformation": "sparsemax",
        **UNIFIED,
    },
    "UnifiedMetric, [mt, src, ref] with the word-level tagger": {
        "class": "unified_metric",
        "input_segments": ["mt", "src", "ref"],
        "word_level_training": True,
        "error_labels": ["minor", "major"],
        "word_layer": 2,
        "layer_transformation": "softmax",
        **UNIFIED,
    },
    "XCOMETMetric": {"class": "xcomet_metric", "word_layer": 2, "layer_transformation": "sparsemax", **UNIFIED},
}


CASES = [(name, "comet", hp) for name, hp in {**COMET_CASES, **UNIFIED_CASES}.items()] + [
    ("BleurtForSequenceClassification, BERT layout", "bleurt", {}),
    ("BleurtForSequenceClassification, RemBERT layout (narrow embeddings)", "bleurt", {"embedding_size": 16}),
    (
        "BleurtForSequenceClassification, BLEURT-20 layout (RemBERT, spm.model)",
        "bleurt",
        {"embedding_size": 16, "spm": 1},
    ),
]


def real_rows(n: int, seed: int) -> list[dict]:
    """``n`` WMT21 DA rows (seeded sample) from ../shared/data, else rows of the tiny test corpus."""
    import pandas as pd

    path = common.DA
    if path.is_file():
        frame = pd.read_csv(path).sample(n=n, random_state=seed)
        texts = ("src", "mt", "ref")
        return [{k: str(r[k]) for k in texts} | {"score": float(r["score"])} for _, r in frame.iterrows()]
    from conftest import TINY_CORPUS

    return [
        {"src": TINY_CORPUS[i % 14], "mt": TINY_CORPUS[(i + 1) % 14], "ref": TINY_CORPUS[i % 14], "score": i / n}
        for i in range(n)
    ]


def run_peer(args, peer: str, encoder: Path, rows_file: Path, out: Path, hparams: dict | None = None) -> dict:
    """The peer's ``scores`` on the rows (and ``spans``, for a word-level model)."""
    command = [peer, "--encoder", str(encoder), "--rows", str(rows_file), "--out", str(out), "--steps", str(args.steps)]
    command += ["--seed", str(args.seed), "--hparams", json.dumps(hparams or {})]
    return common.run_peer("import_peer.py", command, args.peer_python)


def our_scores(checkpoint: Path, rows: list[dict], unified: bool) -> tuple[list[float], list[bool], list | None]:
    """The import's fp32 scores on ``rows``, which rows it cut to its ``max_length``, and its spans (a
    unified model's imported with ``raw_spans``: unbabel-comet's token spans, not on word boundaries)."""
    from lightning_metrics import load_metric
    from lightning_metrics.importers import import_metric

    folder = import_metric(checkpoint, checkpoint.parent / f"{checkpoint.name}-imported", force=True, raw_spans=unified)
    metric = load_metric(str(folder), precision="fp32")
    columns = {k: [r[k] for r in rows] for k in metric.inputs}
    cut = [metric.count_truncated({k: [r[k]] for k in metric.inputs}) > 0 for r in rows]
    result = metric.score(**columns)
    return list(result.scores), cut, result.extra.get("spans")


def same_spans(theirs: list | None, ours: list | None, chosen: list[bool]) -> str:
    """``identical`` when every chosen row's spans have the same offsets and severities, else the count
    of rows that differ; ``–`` for a model without spans."""
    if theirs is None and not any(ours or []):
        return "–"
    key = lambda row: [(s["start"], s["end"], s["severity"]) for s in row]  # noqa: E731
    differ = sum(key(a) != key(b) for a, b, keep in zip(theirs or [], ours or [], chosen) if keep)
    return "identical" if differ == 0 else f"{differ} rows differ"


def largest_gap(theirs: list[float], ours: list[float], chosen: list[bool]) -> float | None:
    gaps = [abs(a - b) for a, b, keep in zip(theirs, ours, chosen) if keep]
    return max(gaps) if gaps else None


def shown(x: float | None) -> str:
    return "–" if x is None else f"{x:.2e}"


def within(r: dict) -> bool:
    """Both differences within the target, and the spans (where there are any) identical."""
    gaps = (r["max_abs_diff"], r.get("max_abs_diff_cut"))
    return all(x is None or x <= TARGET for x in gaps) and r["spans"] in ("–", "identical")


def render(report: dict) -> str:
    """The page ``docs/results/import-parity.md``, from its JSON."""
    lines = [
        f"# Import parity with unbabel-comet, bleurt-pytorch and MetricX ({report['date']})",
        "",
        f"Measured on {report['machine']}; generated by `benchmarks/import_parity.py` from the JSON beside this file:",
        "",
        f"```bash\n{report['command']}\n```",
        "",
        f"Peers: {report['peers']}. Each peer trains (COMET, BLEURT) or is given (MetricX) a checkpoint in its own "
        f"layout and scores {report['rows']} real WMT21 DA rows with its own code; `lightning-metrics import` turns "
        "the checkpoint into an export, which scores the same rows in fp32. Rows longer than the import's "
        "`max_length` are compared apart. A unified model is imported with `--raw-spans` (COMET's token spans).",
        "",
        "| peer class and setting | encoder | rows (cut) | max abs difference | on cut rows | spans "
        f"| within {TARGET:g} |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['case']} | {r['encoder']} | {r['rows']} ({r['rows_cut']}) | {shown(r['max_abs_diff'])} "
            f"| {shown(r.get('max_abs_diff_cut'))} | {r['spans']} | {'yes' if within(r) else 'NO'} |"
        )
    mx = [r for r in report["results"] if "fp32_diff" in r]
    if mx:
        lines += ["", "MetricX's rows compare both sides in float64 (its own `get_dataset` and `MT5ForRegression`, "
                  "`benchmarks/peers/metricx_peer.py`; our export's model cast). In fp32, as each scores, the two "
                  "differ "
                  f"by at most {max(r['fp32_diff'] for r in mx):.1e}, where each side's own fp32 error against "
                  f"float64 reaches {max(max(r['their_fp32_error'], r['our_fp32_error']) for r in mx):.1e} "
                  f"(scores spread over {min(r['score_range'][0] for r in mx):.1f} to "
                  f"{max(r['score_range'][1] for r in mx):.1f} on these random models)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def comet_and_bleurt(args, rows: list[dict], out: Path) -> list[dict]:
    """Every COMET and BLEURT case on both encoders: trained by the peer, imported, compared."""
    from conftest import build_tiny_encoder

    from lightning_metrics.encoders.loading import default_encoder_path

    rows_file = out / "rows.json"
    rows_file.write_text(json.dumps(rows), encoding="utf-8")
    encoders = {"tiny BERT": build_tiny_encoder(out / "tiny-bert"), "all-MiniLM-L6-v2": default_encoder_path()}
    results = []
    for encoder_name, encoder in encoders.items():
        for i, (name, peer, hparams) in enumerate(CASES):
            folder = out / f"{encoder_name.replace(' ', '-')}-{i}"
            peer_out = run_peer(args, peer, encoder, rows_file, folder, hparams)
            theirs = peer_out["scores"]
            ours, cut, our_spans = our_scores(folder, rows, name in UNIFIED_CASES)
            results.append({
                "case": name, "encoder": encoder_name, "rows": len(rows), "rows_cut": sum(cut),
                "max_abs_diff": largest_gap(theirs, ours, [not c for c in cut]),
                "max_abs_diff_cut": largest_gap(theirs, ours, cut),
                "spans": same_spans(peer_out.get("spans"), our_spans, [True] * len(rows)),
            })  # fmt: skip
            print(results[-1], flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-python", default=common.PEER_PYTHON)
    parser.add_argument("--steps", type=int, default=4, help="peer training steps before the checkpoint is saved")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--out", default=str(REPO / "runs" / "import_parity"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metricx", help="google-research/metricx: a clone or a snapshot's git folder (adds MetricX)")
    parser.add_argument("--metricx-python", default=str(REPO / ".venv-metricx" / "bin" / "python"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = real_rows(args.rows, args.seed)
    results = comet_and_bleurt(args, rows, out)
    peers = [peer_versions(args.peer_python, ("unbabel-comet", "bleurt-pytorch", "transformers"))]
    if args.metricx:
        import metricx_parity

        for r in metricx_parity.run(args, rows, out):
            results.append({**r, "encoder": "tiny mT5, both sides in float64", "spans": "–"})
            print(results[-1], flush=True)
        peers.append(f"google-research/metricx at {git_commit(args.metricx)} on " + peer_versions(
            args.metricx_python, ("transformers",)))  # fmt: skip
    command = " ".join(["python benchmarks/import_parity.py", *sys.argv[1:]])
    report = {"date": date.today().isoformat(), "machine": machine(), "command": command, "rows": len(rows),
              "peers": "; ".join(peers), "results": results}  # fmt: skip
    print(publish("import-parity", report, __file__).read_text())
    sys.exit(0 if all(within(r) for r in results) else 1)


def peer_versions(python: str, packages: tuple[str, ...]) -> str:
    """The peer venv's versions of ``packages``."""
    code = "import importlib.metadata as m, sys; print(', '.join(f'{p} {m.version(p)}' for p in sys.argv[1:]))"
    return subprocess.run([python, "-c", code, *packages], capture_output=True, text=True, check=True).stdout.strip()


def git_commit(path: str) -> str:
    folder = Path(path)
    git_dir = folder if (folder / "HEAD").is_file() else folder / ".git"
    done = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()[:12]


if __name__ == "__main__":
    main()
