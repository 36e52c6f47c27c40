#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test (ctest), install the Python
# package and run its tests (pytest), then the C++ tests under AddressSanitizer +
# UndefinedBehaviorSanitizer in a second build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
python=$(bash "$root/scripts/setup_python.sh")
jobs=${GRAPE_JOBS:-$(nproc)}
# ccache leaves the build directory out of its key, so that the sanitizer build gets the objects it
# compiles with the main build's flags (grape_core, grape_check: see CMakeLists.txt) from the cache;
# and rewrites paths under the clone relative to it, so that any clone of the repository on this
# machine reuses another's objects (tests/CMakeLists.txt keeps absolute paths out of the rest).
export CCACHE_NOHASHDIR=1 CCACHE_BASEDIR="$root"

# -g1 (line tables: file:line in backtraces and sanitizer reports) instead of -g: full debug info
# is a third of the compile time of the template-heavy translation units and the tests never read it.
# -O1: the checker and the tests compile a quarter faster than at -O2 (check_grape_a.cpp 25 s
# instead of 33 s); the kernels and the benchmarks keep their own -O3.
GRAPE_BUILD_DIR="$root/build" bash "$root/scripts/build.sh" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DGRAPE_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python"
ctest --test-dir "$root/build" -j "$jobs" --output-on-failure
echo "grape: built and tested in $SECONDS s"

# The Python package: `pip install .` from the build tree above (the same options, so nothing is
# compiled again), then its tests against the installed package.
echo "grape: the Python package"
CMAKE_GENERATOR="Unix Makefiles" SKBUILD_BUILD_DIR="$root/build" SKBUILD_CMAKE_BUILD_TYPE=RelWithDebInfo \
  SKBUILD_CMAKE_DEFINE="GRAPE_BUILD_TESTS=ON;GRAPE_BUILD_BENCH=ON;GRAPE_ENABLE_CUDA=AUTO" \
  "$python" -m pip install -q --disable-pip-version-check --no-build-isolation "$root"
(cd "$root/tests/python" && "$python" -m pytest -q -p no:cacheprovider .)
echo "grape: the Python package tested at $SECONDS s"

if [ "${GRAPE_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "grape: tests again under ASan + UBSan"
  # -O1: sanitizer builds of Eigen and rapidcheck code compile much faster than at -O2; -g1 as above
  # (a checker translation unit: 87 s at -O1 -g, 55 s at -O1 -g1).
  GRAPE_BUILD_DIR="$root/build-sanitize" bash "$root/scripts/build.sh" -DGRAPE_SANITIZE=ON \
    -DGRAPE_BUILD_BENCH=OFF -DGRAPE_ENABLE_CUDA=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$root/build-sanitize" -j "$jobs" --output-on-failure -LE "failtest|nosanitize"
  echo "grape: the sanitizer pass done at $SECONDS s"
fi
