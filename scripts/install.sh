#!/usr/bin/env bash
# Install ortho-sweeps into the current Python environment.
#
#   bash scripts/install.sh          # the package and the `ortho` command
#   bash scripts/install.sh --test   # ... plus pytest and ruff, and the programs the cluster
#                                    # tests start (PostgreSQL, ss: scripts/test-services.sh)
#
# torch is installed first, so that the package's range `torch>=2.13,<2.14` is already
# satisfied when pip resolves the rest:
# - with an NVIDIA GPU (nvidia-smi lists one): torch==2.13.0 from PyPI, a CUDA build (a CPU
#   build installed earlier is removed first: pip would count it as satisfying 2.13.0);
# - without one: the CPU build torch==2.13.0+cpu, taken from pip's configured sources
#   (find-links, a mirror) when one offers it, else from PyTorch's CPU index
#   ($ORTHO_TORCH_CPU_INDEX, default https://download.pytorch.org/whl/cpu), so no CUDA
#   libraries are downloaded.
# Set ORTHO_TORCH=skip to keep a torch you installed yourself.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
pip=("$py" -m pip install --disable-pip-version-check)

installed_torch=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
if [[ "${ORTHO_TORCH:-}" == skip ]]; then
  echo "install: keeping torch ${installed_torch:-(none)} (ORTHO_TORCH=skip)"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "install: NVIDIA GPU found: torch 2.13.0 with CUDA from PyPI"
  if [[ "$installed_torch" == *+cpu ]]; then
    "$py" -m pip uninstall -y torch
  fi
  [[ "$installed_torch" == 2.13.0 || "$installed_torch" == 2.13.0+cu* ]] || "${pip[@]}" "torch==2.13.0"
elif [[ "$installed_torch" == 2.13.0+cpu ]]; then
  echo "install: no GPU; torch $installed_torch (CPU build) already installed"
else
  echo "install: no GPU: torch 2.13.0 CPU build"
  "${pip[@]}" "torch==2.13.0+cpu" 2>/dev/null \
    || "${pip[@]}" "torch==2.13.0+cpu" --index-url "${ORTHO_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
fi

if [[ "${1:-}" == --test ]]; then
  "${pip[@]}" -e ".[test]"
  bash scripts/test-services.sh
else
  "${pip[@]}" -e .
fi
# The C++ time loops of the packed SRNN (ortho_core/models/csrc), built for this machine's CPU;
# where no compiler is found it says so, and the Python loops are used.
"$py" -c 'from ortho_core.models.srnn_native import main; main()'
echo "install: done: $("$py" -c 'import torch, ray, mlflow, optuna; print(f"torch {torch.__version__}, ray {ray.__version__}, mlflow {mlflow.__version__}, optuna {optuna.__version__}")')"
