#pragma once
// The kernels of the CUDA flash attention: one block program per (query block, sequence, head),
// and the backward's two (key blocks over K/V heads, then query blocks), the tile in dynamic shared
// memory (opted in above 48 KiB).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/errors.hpp"
#include "cuda/flash_launch.hpp"

namespace grape::cuda::detail {

template <class Program>
__global__ void flash_kernel(Program p) {
  extern __shared__ __align__(32) unsigned char smem[];
  p.run(blockIdx.x, blockIdx.y, blockIdx.z, block_shape{static_cast<int>(blockDim.x)}, smem);
}

template <class Program>
__global__ void flash_keys_kernel(Program p) {
  extern __shared__ __align__(32) unsigned char smem[];
  p.run_keys(blockIdx.x, blockIdx.y, blockIdx.z, block_shape{static_cast<int>(blockDim.x)}, smem);
}

template <class Program>
__global__ void flash_bias_grad_kernel(Program p) {
  if (threadIdx.x == 0) p.finish_bias_grads(blockIdx.x);
}

template <class Program>
__global__ void flash_queries_kernel(Program p) {
  extern __shared__ __align__(32) unsigned char smem[];
  p.run_queries(blockIdx.x, blockIdx.y, blockIdx.z, block_shape{static_cast<int>(blockDim.x)}, smem);
}

/// Launches `kernel` over (x, sequences, heads) blocks with the plan's threads and shared memory.
template <class Program>
void launch_program(void (*kernel)(Program), const Program& program, const flash_plan& plan, std::int64_t x,
                    std::int64_t sequences, int heads, cudaStream_t stream) {
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(plan.smem_bytes)),
             "flash attention's shared memory");
  const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(sequences), static_cast<unsigned>(heads));
  kernel<<<grid, plan.threads, plan.smem_bytes, stream>>>(program);
  check_launch("the flash attention");
}

template <class T, class Bias>
void launch_flash(const flash_args& ops, const flash_plan& plan, const Bias& bias, cudaStream_t stream) {
  const auto program = program_of<T>(ops, plan, bias);
  launch_program(&flash_kernel<flash_program<T, Bias>>, program, plan, flash_query_blocks(ops, plan), ops.batch,
                 ops.q_heads, stream);
}

template <class T, class Bias>
void launch_flash_backward(const flash_args& ops, const flash_grads& g, const flash_plan& plan, const Bias& bias,
                           cudaStream_t stream) {
  using program_t = flash_backward_program<T, Bias>;
  const auto program = backward_program_of<T>(ops, g, plan, bias);
  const std::int64_t blocks = flash_query_blocks(ops, plan);
  launch_program(&flash_keys_kernel<program_t>, program, plan, blocks, ops.batch, ops.k_heads, stream);
  launch_program(&flash_queries_kernel<program_t>, program, plan, blocks, ops.batch, ops.q_heads, stream);
  if (g.grad_bias) {  // one thread per head sums its partials in a fixed order
    flash_bias_grad_kernel<<<static_cast<unsigned>(ops.q_heads), 32, 0, stream>>>(program);
    check_launch("the bias gradient");
  }
}

// The per-dtype entries flash_launch.hpp declares, for any bias functor: the library's
// translation units (flash_*.cu) instantiate them for the built-in biases, a .cu file of yours
// for a score view (GRAPE_FLASH_SCORE_VIEW below).
template <class Bias>
void launch_flash_f32(const flash_args& ops, const flash_plan& plan, const Bias& bias, cudaStream_t s) {
  launch_flash<float>(ops, plan, bias, s);
}
template <class Bias>
void launch_flash_f16(const flash_args& ops, const flash_plan& plan, const Bias& bias, cudaStream_t s) {
  launch_flash<__half>(ops, plan, bias, s);
}
template <class Bias>
void launch_flash_bf16(const flash_args& ops, const flash_plan& plan, const Bias& bias, cudaStream_t s) {
  launch_flash<__nv_bfloat16>(ops, plan, bias, s);
}
template <class Bias>
void launch_flash_backward_f32(const flash_args& ops, const flash_grads& g, const flash_plan& plan,
                               const Bias& bias, cudaStream_t s) {
  launch_flash_backward<float>(ops, g, plan, bias, s);
}
template <class Bias>
void launch_flash_backward_f16(const flash_args& ops, const flash_grads& g, const flash_plan& plan,
                               const Bias& bias, cudaStream_t s) {
  launch_flash_backward<__half>(ops, g, plan, bias, s);
}
template <class Bias>
void launch_flash_backward_bf16(const flash_args& ops, const flash_grads& g, const flash_plan& plan,
                                const Bias& bias, cudaStream_t s) {
  launch_flash_backward<__nv_bfloat16>(ops, g, plan, bias, s);
}

}  // namespace grape::cuda::detail

#define GRAPE_FLASH_INSTANCES_FOR(SUFFIX, Bias)                                                                 \
  template void launch_flash_##SUFFIX(const flash_args&, const flash_plan&, const Bias&, cudaStream_t);      \
  template void launch_flash_backward_##SUFFIX(const flash_args&, const flash_grads&, const flash_plan&,     \
                                               const Bias&, cudaStream_t);

/// One storage type's kernels for every built-in bias (the library's flash_*.cu).
#define GRAPE_FLASH_INSTANCES(SUFFIX)                     \
  namespace grape::cuda::detail {                         \
  GRAPE_FLASH_INSTANCES_FOR(SUFFIX, no_scores)            \
  GRAPE_FLASH_INSTANCES_FOR(SUFFIX, alibi_scores)         \
  GRAPE_FLASH_INSTANCES_FOR(SUFFIX, linear_scores)        \
  GRAPE_FLASH_INSTANCES_FOR(SUFFIX, t5_scores)            \
  GRAPE_FLASH_INSTANCES_FOR(SUFFIX, fox_scores)           \
  GRAPE_FLASH_INSTANCES_FOR(SUFFIX, gated_scores)         \
  }

/// The flash kernels of a score view of your own (instance_scores.hpp), every storage type,
/// forward and backward: one line in a .cu file (C++20, with the view's header) that
/// cuda::attention's calls then link against.
#define GRAPE_FLASH_SCORE_VIEW(View)                                 \
  namespace grape::cuda::detail {                                    \
  GRAPE_FLASH_INSTANCES_FOR(f32, ::grape::cuda::view_scores<View>)   \
  GRAPE_FLASH_INSTANCES_FOR(f16, ::grape::cuda::view_scores<View>)   \
  GRAPE_FLASH_INSTANCES_FOR(bf16, ::grape::cuda::view_scores<View>)  \
  }
