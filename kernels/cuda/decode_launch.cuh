#pragma once
// The kernels of the CUDA decode attention (decode_program.hpp) and their launch for any score
// functor; decode.cu instantiates them for the built-in biases, GRAPE_DECODE_SCORE_VIEW for yours.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda/bias_tile_thread.hpp"
#include "cuda/decode_launch.hpp"

namespace grape::cuda::detail {

inline void check_decode_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: CUDA launch of ") + what + " failed: " + cudaGetErrorString(e));
}

template <class Program>
__global__ void decode_kernel(Program p) {
  extern __shared__ __align__(32) unsigned char smem[];
  p.run(blockIdx.x, blockIdx.y, blockIdx.z, block_shape{static_cast<int>(blockDim.x)}, smem);
}

template <class F>
__global__ void decode_items_kernel(F f, std::int64_t items) {
  run_items(f, items, blockIdx.x, static_cast<int>(threadIdx.x), gridDim.x, static_cast<int>(blockDim.x));
}

template <class F>
void launch_decode_items(const F& f, std::int64_t items, cudaStream_t stream, const char* what) {
  if (items == 0) return;
  const std::int64_t blocks = (items + 127) / 128;
  decode_items_kernel<<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), 128, 0, stream>>>(f, items);
  check_decode_launch(what);
}

template <class T, class Bias>
void launch_decode_typed(const decode_call& c, const Bias& bias, std::int64_t smem_bytes, cudaStream_t stream) {
  const auto program = decode_program_of<T>(c, bias);
  auto* kernel = &decode_kernel<decode_program<T, Bias>>;
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("grape: the decode's shared memory: ") + cudaGetErrorString(e));
  const dim3 grid(static_cast<unsigned>(c.s.chunks), static_cast<unsigned>(c.s.batch),
                  static_cast<unsigned>(decode_head_blocks(c.s)));
  kernel<<<grid, decode_threads, smem_bytes, stream>>>(program);
  check_decode_launch("the decode");
  launch_decode_items(decode_merge_of<T>(c), c.s.batch * c.s.q_heads, stream, "the decode's merge");
}

template <class Bias>
void launch_decode(const decode_call& c, const Bias& bias, std::int64_t smem_bytes, cudaStream_t stream) {
  switch (c.type) {
    case cpu::dtype::f32: return launch_decode_typed<float>(c, bias, smem_bytes, stream);
    case cpu::dtype::f16: return launch_decode_typed<__half>(c, bias, smem_bytes, stream);
    case cpu::dtype::bf16: return launch_decode_typed<__nv_bfloat16>(c, bias, smem_bytes, stream);
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
