#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds the CUDA kernels and tests/gpu/gpu_check.cu with nvcc and
# g++ directly (no CMake project, so only the CUDA toolkit, g++ and the Eigen, fmt and Boost headers
# are needed), checks the kernels (rotate_qk, GRAPE-M, the GRAPE paper's bias tiles, the flash
# attention) against the CPU kernels on fresh random inputs, and prints a table of bandwidth as a
# fraction of a same-traffic pass measured in the same run (attention: TFLOP/s over the tensor-core
# peak, GRAPE_GPU_PEAK_TFLOPS). Under 5 minutes.
#   bash tests/gpu/run.sh [tokens=32768] [iterations=20]
# Headers: /usr/include/eigen3, /usr/include/fmt and /usr/include/boost (Hana, for the encoding
# types the GRAPE-paper part builds), or GRAPE_EIGEN_DIR / GRAPE_FMT_DIR / GRAPE_BOOST_DIR (copies
# carried to a bare machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${GRAPE_GPU_BUILD:-$root/build-gpu}
mkdir -p "$out"
eigen=${GRAPE_EIGEN_DIR:-/usr/include/eigen3}
fmt_dir=${GRAPE_FMT_DIR:-/usr/include}
boost_dir=${GRAPE_BOOST_DIR:-/usr/include}
arch=${GRAPE_CUDA_ARCH:-90}
nvcc=${NVCC:-nvcc}
inc=(-I"$root/include" -I"$root/kernels" -I"$root/examples" -I"$eigen" -I"$fmt_dir" -I"$boost_dir" -DFMT_HEADER_ONLY)
start=$(date +%s)
objs=()
for f in "$root"/kernels/cpu/*.cpp "$root"/kernels/cuda/*.cpp "$root"/tests/gpu/*.cpp; do
  o="$out/$(basename "$(dirname "$f")")_$(basename "${f%.cpp}").o"
  g++ -std=c++20 -O3 -march=native -fopenmp "${inc[@]}" -I"$(dirname "$(command -v "$nvcc")")/../include" -c "$f" -o "$o" &
  objs+=("$o")
done
for f in "$root"/kernels/cuda/*.cu "$root"/tests/gpu/*.cu "$root"/examples/cuda/tutorial_attention.cu; do
  o="$out/$(basename "$(dirname "$f")")_$(basename "${f%.cu}").o"
  "$nvcc" -std=c++20 -O3 -arch=sm_$arch -Xptxas=--warn-on-spills,--warn-on-local-memory-usage "${inc[@]}" -c "$f" -o "$o" &
  objs+=("$o")
done
wait
"$nvcc" -arch=sm_$arch "${objs[@]}" -Xcompiler -fopenmp -o "$out/gpu_check"
echo "gpu: built in $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
"$out/gpu_check" "${1:-32768}" "${2:-20}"
