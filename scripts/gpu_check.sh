#!/usr/bin/env bash
# The GPU check (never in CI): on a machine with a CUDA GPU, one paper-profile row per method family
# through the engine on one GPU (images/s), and a checkpoint/resume on CUDA compared bit for bit.
# Writes the GPU section of bench/results.md; copies the numbers to $OUT when that is set.
set -euo pipefail
cd "$(dirname "$0")/.."
make setup >/dev/null
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
out=${OUT:-/tmp}
.venv/bin/python scripts/gpu_check.py --json "$out/gpu_check.json" "$@"
cp bench/results.md "$out/results.md" 2>/dev/null || true
