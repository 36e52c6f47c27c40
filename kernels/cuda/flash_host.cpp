// Host side of the CUDA flash attention: the entries for the built-in score biases over
// flash_dispatch.hpp (checks, plan, per-dtype launch), and the device's shared memory limit.
#include <cuda_runtime.h>

#include <stdexcept>

#include "cuda/flash_attention_cuda.hpp"
#include "cuda/flash_dispatch.hpp"
#include "cuda/flash_launch.hpp"

namespace grape::cuda {

std::int64_t detail::shared_memory_limit() {
  int device = 0, limit = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    throw std::runtime_error("grape: cannot read the device's shared memory per block");
  return limit;
}

#define GRAPE_CUDA_DEFINE_FLASH(Scores)                                                                 \
  void flash_attention(const flash_args& ops, const Scores& bias, cudaStream_t stream) {          \
    detail::launch_flash(ops, bias, stream);                                                          \
  }                                                                                                   \
  void flash_attention_backward(const flash_args& ops, const flash_grads& g, const Scores& bias, \
                                cudaStream_t stream) {                                                \
    detail::launch_flash_backward(ops, g, bias, stream);                                              \
  }
GRAPE_CUDA_FLASH_SCORES(GRAPE_CUDA_DEFINE_FLASH)
#undef GRAPE_CUDA_DEFINE_FLASH

}  // namespace grape::cuda
