#!/usr/bin/env bash
# The Python tests (tests/python) against the current torch and transformers from PyPI, pinned in
# python/requirements-pypi-torch.txt, instead of Debian's torch 1.13 that scripts/test.sh uses: a
# second virtual environment (build/venv-pypi-torch, about 6 GB, no system site packages) and its
# own build tree (build-pypi-torch). Not part of CI, for its size; run it by hand.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/setup_python.sh" >/dev/null  # Debian's python3-dev and python3-venv
venv=$root/build/venv-pypi-torch
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$root/python/requirements-pypi-torch.txt"
CMAKE_GENERATOR="Unix Makefiles" SKBUILD_BUILD_DIR="$root/build-pypi-torch" \
  CMAKE_BUILD_PARALLEL_LEVEL=${GRAPE_JOBS:-2} "$venv/bin/pip" install -q --no-build-isolation "$root"
cd "$root/tests/python"
"$venv/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
"$venv/bin/python" -m pytest -q -p no:cacheprovider .
