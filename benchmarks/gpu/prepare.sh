#!/usr/bin/env bash
# Run HERE (a machine with pip and the repository), before a GPU run: fills benchmarks/gpu/carry/
# (git-ignored, ~20 MiB) with what the GPU machine lacks and cannot download:
#   wheels/ours  jsonargparse, entmax, datasets, bert-score (its torch, Lightning and transformers 5 are there)
#   wheels/peer  unbabel-comet and its transformers 4 stack (installed apart, never beside ours)
#   data/        a sample of ../shared/data's WMT21 DA rows: whole sources for the WMT layout, one row
#                of every other source for the distinct layout (the rows never enter git)
#   tokenizer/   all-MiniLM-L6-v2's tokenizer files (the encoders' weights are built there, at random)
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-../../.venv/bin/python}
PLATFORM="--only-binary=:all: --python-version ${PYVER:-3.12} --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
mkdir -p carry/wheels/ours carry/wheels/peer carry/data carry/tokenizer
$PY -m pip download -q --no-deps $PLATFORM -d carry/wheels/ours \
  jsonargparse==4.53.0 docstring-parser==0.18.0 typeshed-client==2.15.0 entmax==1.3 bert-score==0.3.13 \
  datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
$PY -m pip download -q --no-deps $PLATFORM -d carry/wheels/peer \
  unbabel-comet==2.2.7 transformers==4.57.6 tokenizers==0.22.2 huggingface_hub==0.36.2 jsonargparse==3.13.1 \
  torchmetrics==0.10.3 entmax==1.3
$PY - <<'PY'
import csv, shutil
from pathlib import Path
from lightning_metrics.encoders.loading import default_encoder_path

source = Path("../../../shared/data/wmt21_da_toen.csv")
with source.open(encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))
groups = {}
for row in rows:
    groups.setdefault((row["lp"], row["src"]), []).append(row)
sample = []  # whole sources (every system) up to 12,000 rows: the WMT layout; then one row of every other source
for group in groups.values():
    sample += group if len(sample) < 12000 else group[:1]
with open("carry/data/wmt21_da_sample.csv", "w", encoding="utf-8", newline="") as g:
    writer = csv.DictWriter(g, fieldnames=["lp", "src", "mt", "ref", "score", "system"], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(sample)
print(f"{len(sample)} rows, {len(groups)} sources")
for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
    if (default_encoder_path() / name).is_file():
        shutil.copy(default_encoder_path() / name, Path("carry/tokenizer") / name)
PY
du -sh carry
