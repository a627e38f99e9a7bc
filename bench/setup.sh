#!/usr/bin/env bash
# Installs everything the allreduce references need (bench/allreduce.sh):
#   - Debian: openmpi-bin, libopenmpi-dev (Open MPI + mpicc), iperf3, gcc
#   - Python: pinned versions in bench/requirements.txt (numpy, xgboost, mpi4py)
# Idempotent: apt-get update runs once, and only if a Debian package is missing;
# pip leaves already-satisfied pins alone. Safe to re-run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
start=$(date +%s)

apt_pkgs=(openmpi-bin libopenmpi-dev iperf3 gcc make)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages already installed: ${apt_pkgs[*]}"
fi

# mpi4py's PyPI wheel loads the system libmpi at run time (it ships one extension per MPI
# ABI: Open MPI and MPICH), so it uses the Open MPI above; MPICC only matters if pip
# has to build mpi4py from source.
export MPICC="${MPICC:-mpicc}"
echo "setup: pip install -r $here/requirements.txt"
"$PYTHON" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"

# Build the loopback TCP probe (bench/tcp/).
make -s -C "$here/tcp"

"$PYTHON" - <<'PY'
import numpy, xgboost
from mpi4py import MPI
print("setup: numpy", numpy.__version__, "| xgboost", xgboost.__version__,
      "| mpi4py", __import__("mpi4py").__version__)
print("setup: MPI library:", MPI.Get_library_version().splitlines()[0])
PY
echo "setup: done in $(( $(date +%s) - start )) s"
