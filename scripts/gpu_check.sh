#!/usr/bin/env bash
# The GPU check (about 10 minutes on one GPU; never in CI): scripts/gpu_check.py's sections, results in
# results/gpu_check/ (or --out). Installs nothing: it runs the project's .venv if there is one, else the python on
# PATH, with this checkout's src/ on PYTHONPATH (GPU machines and compute nodes often cannot reach a package index).
#   scripts/gpu_check.sh              # on a GPU machine
#   scripts/gpu_check.sh --dry-run    # every section on the CPU at tiny sizes (CI runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
# $PYTHON (an interpreter to use) first, then the .venv, then PATH
if [ -n "${PYTHON:-}" ]; then py=$PYTHON; elif [ -x .venv/bin/python ]; then py=.venv/bin/python
else py=$(command -v python3 || command -v python); fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" exec "$py" scripts/gpu_check.py "$@"
