#!/usr/bin/env bash
# Run ON the GPU machine, from the repository root, after benchmarks/gpu/prepare.sh filled carry/:
#   bash benchmarks/gpu/run.sh [OUT_DIR] [bench.py options]
# Installs the carried wheels into two separate folders (ours beside the image's transformers 5,
# the peer's transformers 4 stack apart, on the peer's PYTHONPATH only), then runs bench.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-${OUT:-runs/gpu-bench}}; shift || true
CARRY=benchmarks/gpu/carry
for side in ours peer; do
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/lm-$side $CARRY/wheels/$side/*.whl
done
export PYTHONPATH=/tmp/lm-ours:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=offline
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 benchmarks/gpu/bench.py --out "$OUT" --peer-python python3 --peer-path /tmp/lm-peer "$@"
