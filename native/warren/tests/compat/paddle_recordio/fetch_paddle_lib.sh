#!/usr/bin/env bash
# Fetches PaddlePaddle's own RecordIO library (librecordio.so, built by PaddlePaddle from its
# Go package) from the `recordio` wheel on PyPI, checks the wheel's pinned hash, and unpacks it
# into DEST. Prints the path of librecordio.so. Linux x86_64 only (the only Linux wheel).
#
#   fetch_paddle_lib.sh DEST
set -euo pipefail
dest=${1:?usage: fetch_paddle_lib.sh DEST}
lib="$dest/recordio-0.1.6.data/purelib/recordio/librecordio.so"
if [[ -f "$lib" ]]; then
    echo "$lib"
    exit 0
fi
if [[ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]]; then
    echo "fetch_paddle_lib.sh: the recordio 0.1.6 wheel is for Linux x86_64 only" >&2
    exit 1
fi
mkdir -p "$dest"
here=$(cd "$(dirname "$0")" && pwd)
# The wheel is tagged cp35 but holds only ctypes code and a C shared library, so it is
# fetched for that tag and unpacked rather than installed.
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.5 --implementation cp --abi cp35m --platform manylinux1_x86_64 \
    --require-hashes -r "$here/paddle_lib_requirements.txt" -d "$dest" >&2
python3 -m zipfile -e "$dest/recordio-0.1.6-cp35-cp35m-manylinux1_x86_64.whl" "$dest"
test -f "$lib"
echo "$lib"
