#pragma once
// The kernels of the CUDA decode attention (decode_program.hpp) and their launch for any score
// functor; decode.cu instantiates them for the built-in biases, GRAPE_DECODE_SCORE_VIEW for yours.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/decode_launch.hpp"
#include "cuda/errors.hpp"
#include "cuda/launch.cuh"

namespace grape::cuda::detail {

/// The grid of the decode's one-thread-per-item launches (the positions, the merge).
inline constexpr item_grid decode_item_grid{128, 4096};

template <class Program>
__global__ void decode_kernel(Program p) {
  extern __shared__ __align__(32) unsigned char smem[];
  p.run(blockIdx.x, blockIdx.y, blockIdx.z, block_shape{static_cast<int>(blockDim.x)}, smem);
}

template <class T, class Bias>
void launch_decode_typed(const decode_call& c, const Bias& bias, std::int64_t smem_bytes, cudaStream_t stream) {
  const auto program = decode_program_of<T>(c, bias);
  auto* kernel = &decode_kernel<decode_program<T, Bias>>;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)),
             "the decode's shared memory");
  const dim3 grid(static_cast<unsigned>(c.s.chunks), static_cast<unsigned>(c.s.batch),
                  static_cast<unsigned>(decode_head_blocks(c.s)));
  kernel<<<grid, decode_threads, smem_bytes, stream>>>(program);
  check_launch("the decode");
  launch_items(decode_merge_of<T>(c), c.s.batch * c.s.q_heads, decode_item_grid, stream, "the decode's merge");
}

template <class Bias>
void launch_decode(const decode_call& c, const Bias& bias, std::int64_t smem_bytes, cudaStream_t stream) {
  switch (c.type) {
    case kernel::dtype::f32: return launch_decode_typed<float>(c, bias, smem_bytes, stream);
    case kernel::dtype::f16: return launch_decode_typed<__half>(c, bias, smem_bytes, stream);
    case kernel::dtype::bf16: return launch_decode_typed<__nv_bfloat16>(c, bias, smem_bytes, stream);
  }
}

}  // namespace grape::cuda::detail

#define GRAPE_DECODE_INSTANCE(Bias) \
  template void launch_decode(const decode_call&, const Bias&, std::int64_t, cudaStream_t);

/// The decode kernels of a score view of your own (instance_scores.hpp), every storage type: one
/// line in a .cu file (C++20, with the view's header), next to GRAPE_FLASH_SCORE_VIEW.
#define GRAPE_DECODE_SCORE_VIEW(View)                            \
  namespace grape::cuda::detail {                                \
  GRAPE_DECODE_INSTANCE(::grape::cuda::view_scores<View>)        \
  }
