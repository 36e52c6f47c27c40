#!/usr/bin/env bash
# Configures and builds into ${GRAPE_BUILD_DIR:-build}. Extra arguments go to cmake's configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GRAPE_BUILD_DIR:-$root/build}
jobs=${GRAPE_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${GRAPE_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$build" -j "$jobs"
