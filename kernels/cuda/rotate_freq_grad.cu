// The CUDA frequency gradient of rotate_qk (rotate_freq_grad_thread.hpp), every storage type: a
// block per token, then a thread per plane.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda/bias_tile_thread.hpp"
#include "cuda/launch.cuh"
#include "cuda/rotate_freq_grad_launch.hpp"
#include "cuda/rotate_freq_grad_thread.hpp"

namespace grape::cuda::detail {
namespace {

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: CUDA launch of ") + what + " failed: " + cudaGetErrorString(e));
}

__global__ void freq_grad_sum_kernel(freq_grad_sum f) {
  run_items(f, f.planes, blockIdx.x, static_cast<int>(threadIdx.x), gridDim.x, static_cast<int>(blockDim.x));
}

template <class T>
void launch_tokens(const freq_grad_call& c, std::int64_t tokens, cudaStream_t stream) {
  const int half = c.p.rotary_dim / 2;
  const int block = half >= 256 ? 256 : (half + 31) / 32 * 32;
  two_phase_kernel<<<static_cast<unsigned>(tokens), block, c.p.rotary_dim * sizeof(float), stream>>>(
      freq_grad_token<T>{c});
  check_launch("the frequency gradient");
}

}  // namespace

void launch_freq_grad(const freq_grad_call& c, cpu::dtype type, std::int64_t tokens, double* grad_inv_freq,
                      cudaStream_t stream) {
  if (tokens == 0) {
    const cudaError_t e = cudaMemsetAsync(grad_inv_freq, 0, c.p.rotary_dim / 2 * sizeof(double), stream);
    if (e != cudaSuccess) throw std::runtime_error(std::string("grape: cudaMemsetAsync: ") + cudaGetErrorString(e));
    return;
  }
  switch (type) {
    case cpu::dtype::f32: launch_tokens<float>(c, tokens, stream); break;
    case cpu::dtype::f16: launch_tokens<__half>(c, tokens, stream); break;
    case cpu::dtype::bf16: launch_tokens<__nv_bfloat16>(c, tokens, stream); break;
  }
  freq_grad_sum_kernel<<<1, 256, 0, stream>>>(freq_grad_sum{c.partial, tokens, c.p.rotary_dim / 2, grad_inv_freq});
  check_launch("the frequency gradient's sum");
}

}  // namespace grape::cuda::detail
