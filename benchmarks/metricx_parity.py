"""MetricX's side of ``import_parity.py``: tiny random MetricX checkpoints scored by google-research/metricx's
own code and by our import, on the same rows, in every version and mode. Its ``predict`` command line runs
as it runs (fp32, batch 1); its ``get_dataset`` and ``MT5ForRegression`` also run in float64
(``peers/metricx_peer.py``), as does our import's model. The float64 difference is the parity (target
1e-5); the fp32 one is reported beside each side's own fp32 error against float64.

The checkpoints are the tests' (``tests/metricx_fixtures.py``): a random mT5 with mT5's 250,112-entry
vocabulary and a sentencepiece tokenizer trained on the tiny corpus, saved as MetricX saves one, with
its own score row (untied) or mT5's tied embeddings. MetricX's code pins transformers 4.30.2 (its
``models.py`` does not run on later 4.x), so it runs in its own venv, ``.venv-metricx`` (``make peer-venv``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import common  # noqa: F401  (the offline environment first)

# (version, mode): MetricX-24's three inputs, MetricX-23's two. Released MetricX checkpoints have their own
# head (``tie_word_embeddings: false``); MetricX's class never ties one (it has no get_output_embeddings),
# so a tied checkpoint would leave its head random there: only untied ones are compared.
CASES = [("24", "both"), ("24", "reference"), ("24", "qe"), ("23", "reference"), ("23", "qe")]


def metricx_code(path: Path, out: Path) -> Path:
    """google-research/metricx's code: ``path`` itself (a clone), or a snapshot's git folder unpacked."""
    if (path / "metricx24").is_dir():
        return path
    git_dir = path if (path / "HEAD").is_file() else path / ".git"
    archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "HEAD"], capture_output=True, check=True)
    target = out / "metricx-src"
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target


def peer_scores(python: str, code: Path, folder: Path, tokenizer: Path, version: str, mode: str, rows, out: Path):
    """MetricX's ``predict`` on ``rows``: its input file, its command line, its predictions."""
    from lightning_metrics.encoders.template import MAX_INPUT_LENGTH

    source = (lambda r: "") if mode == "reference" and version == "24" else (lambda r: r["src"])
    lines = [json.dumps({"source": source(r), "hypothesis": r["mt"], "reference": r["ref"]}) for r in rows]
    (out / "input.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = [python, "-m", f"metricx{version}.predict", "--tokenizer", str(tokenizer),
               "--model_name_or_path", str(folder), "--max_input_length", str(MAX_INPUT_LENGTH[version]),
               "--batch_size", "1", "--input_file", str(out / "input.jsonl"),
               "--output_file", str(out / "predictions.jsonl"), *(["--qe"] if mode == "qe" else [])]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(code), "CUDA_VISIBLE_DEVICES": "", "WANDB_DISABLED": "true"}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"MetricX's predict failed:\n{done.stderr[-3000:]}")
    return [json.loads(x)["prediction"] for x in (out / "predictions.jsonl").read_text().splitlines() if x]


def peer_float64(python: str, code: Path, folder: Path, tokenizer: Path, version: str, mode: str, out: Path):
    """The same inputs (its ``get_dataset``) through its ``MT5ForRegression`` in float64."""
    from lightning_metrics.encoders.template import MAX_INPUT_LENGTH

    args = [version, str(folder), str(tokenizer), str(out / "input.jsonl"), str(MAX_INPUT_LENGTH[version])]
    return common.run_peer("metricx_peer.py", [*args, *(["--qe"] if mode == "qe" else [])], python, str(code))["scores"]


def our_scores(folder: Path, tokenizer: Path, version: str, mode: str, rows, out: Path) -> tuple[list, list, int]:
    """The import's scores in fp32 (as it scores) and in float64 (its model cast), and the rows it cut."""
    from lightning_metrics import load_metric
    from lightning_metrics.importers import import_metric

    export = import_metric(folder, out / "imported", tokenizer=str(tokenizer), version=version, mode=mode, force=True)
    metric = load_metric(str(export), precision="fp32")
    columns = {k: [r[k] for r in rows] for k in metric.inputs}
    result = metric.score(**columns)
    metric.model.encoder.double()  # the mT5 stack and the score row in float64; scoring at "fp32" casts nothing
    metric.model.score_head.double()  # back, as the weights are marked as loaded in fp32
    return list(result.scores), list(metric.score(**columns).scores), result.truncated


def mt5_tokenizer(out: Path) -> Path:
    """A tokenizer folder as google/mt5-* holds one (its ``spiece.model`` and a small config, which
    transformers 4 and 5 both read), with the tests' tiny sentencepiece model: both sides read these files."""
    from metricx_fixtures import build_tokenizer

    trained = build_tokenizer(out / "metricx-tokenizer-trained")
    folder = out / "metricx-tokenizer"
    shutil.rmtree(folder, ignore_errors=True)  # only these two files: no tokenizer.json of another version
    folder.mkdir(parents=True)
    (folder / "spiece.model").write_bytes((trained / "spiece.model").read_bytes())
    config = {"tokenizer_class": "T5Tokenizer", "extra_ids": 0, "eos_token": "</s>", "unk_token": "<unk>",
              "pad_token": "<pad>"}  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def run(args, rows: list[dict], out: Path) -> list[dict]:
    """One result per case: the largest absolute difference, and the rows each side cut."""
    from metricx_fixtures import build_metricx

    code = metricx_code(Path(args.metricx), out)
    tokenizer = mt5_tokenizer(out)
    results = []
    for version, mode in CASES:
        case = out / f"metricx-{version}-{mode}"
        folder = build_metricx(case / f"metricx-{version}-tiny", tokenizer)
        theirs = peer_scores(args.metricx_python, code, folder, tokenizer, version, mode, rows, case)
        exact = peer_float64(args.metricx_python, code, folder, tokenizer, version, mode, case)
        ours, ours64, cut = our_scores(folder, tokenizer, version, mode, rows, case)
        gap = lambda a, b: max(abs(x - y) for x, y in zip(a, b))  # noqa: E731
        results.append({
            "case": f"MetricX-{version} MT5ForRegression, {mode}", "rows": len(rows), "rows_cut": cut,
            "max_abs_diff": gap(ours64, exact), "fp32_diff": gap(ours, theirs), "their_fp32_error": gap(theirs, exact),
            "our_fp32_error": gap(ours, exact), "score_range": [min(exact), max(exact)],
        })  # fmt: skip
    return results
