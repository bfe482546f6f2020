"""Imports score like the peers: every supported class, trained by the peer's own code, imported, scored.

    .venv/bin/python benchmarks/import_parity.py [--peer-python .venv-comet/bin/python] [--steps 4]
        [--rows 32] [--out runs/import_parity] [--seed 0]

For each COMET class and setting below (the unified ``UnifiedMetric`` and ``XCOMETMetric`` included, whose
error spans must also be identical), and for BLEURT, on a tiny random BERT and on the default
encoder (all-MiniLM-L6-v2): the peer (``benchmarks/peers/import_peer.py``, in the peer venv of
``make peer-venv``) trains a checkpoint for a few steps, saves it in its own layout and prints its
``predict`` scores on real WMT rows; ``lightning-metrics import`` turns the checkpoint into an export
and ``load_metric(...).score`` scores the same rows in fp32. The table gives the largest absolute
difference per case, apart for the rows longer than the import's ``max_length`` (cut: a pair is cut
as BERT and BLEURT cut it, the second side on a tie, see ``data.batching.encode_pairs``); the target
is at most 1e-5, and the script exits 1 if any case misses it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import common  # the offline environment, before anything loads transformers

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


def table_row(name: str, encoder: str, whole: float | None, cut: float | None, n_cut: int, n: int, spans: str) -> str:
    def shown(x):
        return "–" if x is None else f"{x:.2e}"

    ok = all(x is None or x <= TARGET for x in (whole, cut)) and spans in ("–", "identical")
    return f"| {name} | {encoder} | {n} ({n_cut}) | {shown(whole)} | {shown(cut)} | {spans} | {'yes' if ok else 'NO'} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-python", default=common.PEER_PYTHON)
    parser.add_argument("--steps", type=int, default=4, help="peer training steps before the checkpoint is saved")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--out", default=str(REPO / "runs" / "import_parity"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from conftest import build_tiny_encoder

    from lightning_metrics.encoders.loading import default_encoder_path

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = real_rows(args.rows, args.seed)
    rows_file = out / "rows.json"
    rows_file.write_text(json.dumps(rows), encoding="utf-8")
    encoders = {"tiny BERT": build_tiny_encoder(out / "tiny-bert"), "all-MiniLM-L6-v2": default_encoder_path()}
    cases = [(name, "comet", hp) for name, hp in {**COMET_CASES, **UNIFIED_CASES}.items()] + [
        ("BleurtForSequenceClassification, BERT layout", "bleurt", {}),
        ("BleurtForSequenceClassification, RemBERT layout (narrow embeddings)", "bleurt", {"embedding_size": 16}),
        (
            "BleurtForSequenceClassification, BLEURT-20 layout (RemBERT, spm.model)",
            "bleurt",
            {"embedding_size": 16, "spm": 1},
        ),
    ]
    print(
        f"| peer class and setting | encoder | rows (cut) | max abs difference | on cut rows | spans (all rows) "
        f"| within {TARGET:g} |"
    )
    print("|---|---|---|---|---|---|---|")
    results, started = [], time.perf_counter()
    for encoder_name, encoder in encoders.items():
        for i, (name, peer, hparams) in enumerate(cases):
            folder = out / f"{encoder_name.replace(' ', '-')}-{i}"
            peer_out = run_peer(args, peer, encoder, rows_file, folder, hparams)
            theirs = peer_out["scores"]
            ours, cut, our_spans = our_scores(folder, rows, name in UNIFIED_CASES)
            whole = largest_gap(theirs, ours, [not c for c in cut])
            on_cut = largest_gap(theirs, ours, cut)
            spans = same_spans(peer_out.get("spans"), our_spans, [True] * len(rows))
            line = table_row(name, encoder_name, whole, on_cut, sum(cut), len(rows), spans)
            results.append({"case": name, "encoder": encoder_name, "rows": len(rows), "rows_cut": sum(cut)})
            results[-1].update(max_abs_diff=whole, max_abs_diff_cut=on_cut, spans=spans, ok=line.endswith("yes |"))
            print(line)
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"\n{len(results)} cases in {time.perf_counter() - started:.0f} s; results in {out / 'results.json'}")
    sys.exit(0 if all(r["ok"] for r in results) else 1)


if __name__ == "__main__":
    main()
