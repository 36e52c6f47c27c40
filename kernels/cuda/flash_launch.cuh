#pragma once
// The kernel of the CUDA flash attention: one block program per (query block, sequence, head),
// the tile in dynamic shared memory (opted in above 48 KiB).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda/flash_launch.hpp"

namespace grape::cuda::detail {

template <class Program>
__global__ void flash_kernel(Program p) {
  extern __shared__ __align__(32) unsigned char smem[];
  p.run(blockIdx.x, blockIdx.y, blockIdx.z, block_shape{static_cast<int>(blockDim.x)}, smem);
}

template <class T, class Bias>
void launch_flash(const flash_operands& ops, const flash_plan& plan, const Bias& bias, cudaStream_t stream) {
  const auto program = program_of<T>(ops, plan, bias);
  auto* kernel = &flash_kernel<flash_program<T, Bias>>;
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("grape: ") + what + ": " + cudaGetErrorString(e));
  };
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(plan.smem_bytes)),
        "flash attention's shared memory");
  const dim3 grid(static_cast<unsigned>(flash_query_blocks(ops, plan)), static_cast<unsigned>(ops.batch),
                  static_cast<unsigned>(ops.q_heads));
  kernel<<<grid, plan.threads, plan.smem_bytes, stream>>>(program);
  check(cudaGetLastError(), "CUDA launch of the flash attention failed");
}

}  // namespace grape::cuda::detail

#define GRAPE_FLASH_INSTANCES(SUFFIX, T)                                                                           \
  namespace grape::cuda::detail {                                                                                  \
  template <class Bias>                                                                                            \
  void launch_flash_##SUFFIX(const flash_operands& ops, const flash_plan& plan, const Bias& bias, cudaStream_t s) { \
    launch_flash<T>(ops, plan, bias, s);                                                                           \
  }                                                                                                                \
  template void launch_flash_##SUFFIX(const flash_operands&, const flash_plan&, const no_scores&, cudaStream_t);   \
  template void launch_flash_##SUFFIX(const flash_operands&, const flash_plan&, const alibi_scores&, cudaStream_t); \
  template void launch_flash_##SUFFIX(const flash_operands&, const flash_plan&, const t5_scores&, cudaStream_t);   \
  template void launch_flash_##SUFFIX(const flash_operands&, const flash_plan&, const fox_scores&, cudaStream_t);  \
  template void launch_flash_##SUFFIX(const flash_operands&, const flash_plan&, const gated_scores&, cudaStream_t); \
  }
