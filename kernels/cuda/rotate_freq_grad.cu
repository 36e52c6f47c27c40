// The CUDA frequency gradient of rotate_qk (rotate_freq_grad_thread.hpp), every storage type: a
// block per token, then a thread per plane.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/errors.hpp"
#include "cuda/launch.cuh"
#include "cuda/rotate_freq_grad_launch.hpp"
#include "cuda/rotate_freq_grad_thread.hpp"

namespace grape::cuda::detail {
namespace {

/// One block sums every plane's partials.
constexpr item_grid freq_grad_sum_grid{256, 1};

template <class T>
void launch_tokens(const freq_grad_call& c, std::int64_t tokens, cudaStream_t stream) {
  const int half = c.p.rotary_dim / 2;
  const int block = half >= 256 ? 256 : (half + 31) / 32 * 32;
  launch_two_phase(freq_grad_token<T>{c}, tokens, block, c.p.rotary_dim * sizeof(float), stream,
                   "the frequency gradient");
}

}  // namespace

void launch_freq_grad(const freq_grad_call& c, kernel::dtype type, std::int64_t tokens, double* grad_inv_freq,
                      cudaStream_t stream) {
  if (tokens == 0) {
    check_cuda(cudaMemsetAsync(grad_inv_freq, 0, c.p.rotary_dim / 2 * sizeof(double), stream), "cudaMemsetAsync");
    return;
  }
  switch (type) {
    case kernel::dtype::f32: launch_tokens<float>(c, tokens, stream); break;
    case kernel::dtype::f16: launch_tokens<__half>(c, tokens, stream); break;
    case kernel::dtype::bf16: launch_tokens<__nv_bfloat16>(c, tokens, stream); break;
  }
  const freq_grad_sum sum{c.partial, tokens, c.p.rotary_dim / 2, grad_inv_freq};
  launch_items(sum, sum.planes, freq_grad_sum_grid, stream, "the frequency gradient's sum");
}

}  // namespace grape::cuda::detail
