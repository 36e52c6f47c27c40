#!/usr/bin/env bash
# The Python package's build and test environment: Debian's python3-dev, python3-venv, python3-torch,
# python3-numpy and python3-matplotlib (only those missing; needs root), then a virtual environment (default
# build/venv) made from Debian's python3 with --system-site-packages, so torch and numpy are seen
# in it, holding python/requirements.txt from PyPI. Prints the environment's python.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${GRAPE_VENV:-$root/build/venv}
# libopenblas0-pthread: Debian's torch calls the system libblas.so.3, whose default is the
# reference BLAS (2.5 GFLOPS on a float32 matmul here); OpenBLAS takes over that alternative (15.7).
packages=(python3-dev python3-venv python3-torch python3-numpy python3-matplotlib libopenblas0-pthread)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "grape: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r "$root/python/requirements.txt" >&2
echo "$venv/bin/python"
