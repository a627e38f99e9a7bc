#!/usr/bin/env bash
# Installs the torchrun reference of the resize-latency benchmark (bench/resize/run.sh):
# PyTorch from PyPI into its own venv, bench/resize/.venv (gitignored).
#
# PyPI's Linux x86_64 torch wheel (~1 GB installed) depends on ~3 GB of CUDA packages that a
# CPU-only gloo benchmark never uses, and has no CPU-only variant on PyPI. So torch is
# installed with --no-deps, plus the pure-Python packages `import torch` and torchrun need,
# plus the CUDA runtime libraries libtorch is linked against (it does not load without them,
# GPU or not); triton, cuda-bindings, cusolver, nvtx and the cuda-toolkit meta package are
# left out (bench/resize/requirements.txt). Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${TORCH_VERSION:-2.15.0}"
venv="$here/.venv"
start=$(date +%s)
[ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "setup: pip install --no-deps torch==$TORCH_VERSION (the CUDA packages it names are left out)"
  "${pip[@]}" --no-deps "torch==$TORCH_VERSION"
  "${pip[@]}" --no-deps -r "$here/requirements.txt"
fi
"$venv/bin/python" - <<'PY'
import torch, torch.distributed as dist
print("setup: torch", torch.__version__, "| cuda available:", torch.cuda.is_available(),
      "| gloo:", dist.is_gloo_available())
PY
du -sh "$venv" | sed 's/^/setup: venv size /'
echo "setup: done in $(( $(date +%s) - start )) s"
