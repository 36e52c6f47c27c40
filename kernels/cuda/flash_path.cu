// The CUDA flash attention with GRAPE-AP's walking bias (path_scores.hpp), every storage type: its
// own translation unit, as its float64 terms make it the heaviest of the biases to compile.
#include "cuda/flash_launch.cuh"

namespace grape::cuda::detail {
GRAPE_FLASH_INSTANCES_FOR(f32, path_integral_scores)
GRAPE_FLASH_INSTANCES_FOR(f16, path_integral_scores)
GRAPE_FLASH_INSTANCES_FOR(bf16, path_integral_scores)
}  // namespace grape::cuda::detail
