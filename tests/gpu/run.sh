#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds the CUDA kernels and tests/gpu/gpu_check.cu with nvcc and
# g++ directly (no CMake project, so only the CUDA toolkit, g++ and the Eigen and fmt headers are
# needed), checks the kernel against the CPU kernel on fresh random inputs, and prints a table of
# bandwidth as a fraction of a device-to-device copy measured in the same run. Under 5 minutes.
#   bash tests/gpu/run.sh [tokens=32768] [iterations=20]
# Headers: /usr/include/eigen3 and /usr/include/fmt, or GRAPE_EIGEN_DIR / GRAPE_FMT_DIR (a copy
# carried to a bare machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${GRAPE_GPU_BUILD:-$root/build-gpu}
mkdir -p "$out"
eigen=${GRAPE_EIGEN_DIR:-/usr/include/eigen3}
fmt_dir=${GRAPE_FMT_DIR:-/usr/include}
arch=${GRAPE_CUDA_ARCH:-90}
nvcc=${NVCC:-nvcc}
inc=(-I"$root/include" -I"$root/kernels" -I"$eigen" -I"$fmt_dir" -DFMT_HEADER_ONLY)
start=$(date +%s)
objs=()
for f in "$root"/kernels/cpu/*.cpp "$root"/kernels/cuda/rotate_qk_host.cpp; do
  o="$out/$(basename "$(dirname "$f")")_$(basename "${f%.cpp}").o"
  g++ -std=c++20 -O3 -march=native -fopenmp "${inc[@]}" -I"$(dirname "$(command -v "$nvcc")")/../include" -c "$f" -o "$o" &
  objs+=("$o")
done
for f in "$root"/kernels/cuda/*.cu "$root"/tests/gpu/gpu_check.cu; do
  o="$out/$(basename "$(dirname "$f")")_$(basename "${f%.cu}").o"
  "$nvcc" -std=c++20 -O3 -arch=sm_$arch -Xptxas=--warn-on-spills,--warn-on-local-memory-usage "${inc[@]}" -c "$f" -o "$o" &
  objs+=("$o")
done
wait
"$nvcc" -arch=sm_$arch "${objs[@]}" -Xcompiler -fopenmp -o "$out/gpu_check"
echo "gpu: built in $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
"$out/gpu_check" "${1:-32768}" "${2:-20}"
