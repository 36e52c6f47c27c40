// The CUDA flash attention for float storage (one translation unit per dtype keeps nvcc time down).
#include "cuda/bias_positions.hpp"
#include "cuda/flash_launch.cuh"

GRAPE_FLASH_INSTANCES(f32)

namespace grape::cuda::detail {
namespace {
__global__ void bias_positions_kernel(position_source source, std::int64_t tokens, std::int64_t max_position,
                                      std::int64_t* out, int* error) {
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < tokens;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t p = source.at(t);
    if (p < 0 || p >= max_position) *error = 1;
    out[t] = p;
  }
}

__global__ void position_check_kernel(const std::int64_t* positions, std::int64_t tokens, std::int64_t limit,
                                      int* error) {
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < tokens;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    if (positions[t] < 0 || positions[t] >= limit) *error = 1;
}
}  // namespace

void launch_position_check(const std::int64_t* positions, std::int64_t tokens, std::int64_t limit, int* error,
                           cudaStream_t stream) {
  if (tokens == 0) return;
  const std::int64_t blocks = (tokens + 255) / 256;
  position_check_kernel<<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(positions, tokens,
                                                                                                  limit, error);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw std::runtime_error(std::string("grape: CUDA launch of the position check failed: ") + cudaGetErrorString(e));
}
void launch_bias_positions(const position_source& source, std::int64_t tokens, std::int64_t max_position,
                           std::int64_t* out, int* error, cudaStream_t stream) {
  if (tokens == 0) return;
  const std::int64_t blocks = (tokens + 255) / 256;
  bias_positions_kernel<<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(
      source, tokens, max_position, out, error);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw std::runtime_error(std::string("grape: CUDA launch of the bias positions failed: ") + cudaGetErrorString(e));
}
}  // namespace grape::cuda::detail
