#pragma once
// CUDA rotate_qk for any encoding instance: the device counterpart of cpu::rotate_qk(instance,
// args) (kernels/cpu/encode_qk.hpp). In a .cu file compiled as C++20 (nvcc -std=c++20):
//
//   const grape::cuda::device_encoding enc(E::make(params));   // view arrays uploaded once
//   grape::cuda::rotate_qk(enc, args, total_tokens, device_error_flag, stream);
//
// args is the CPU call's rotate_qk_args with device pointers; the plan and its checks are the
// CPU's (make_instance_plan, without reading device memory); the body is encode_token_thread over
// the representation's view, or, for rotation planes (kernel_traits), the rotary_spec kernel. Bad positions set *device_error_flag and leave that token untouched.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/rotate_plan.hpp"
#include "cuda/device_view.hpp"
#include "cuda/encode_qk_thread.hpp"
#include "cuda/launch.cuh"
#include "cuda/rotate_qk_call.hpp"
#include "grape/detail/error.hpp"

namespace grape::cuda {
namespace detail {

/// Default dynamic shared memory of a block (no opt-in needed on sm_80 and sm_90).
inline constexpr std::int64_t shared_budget_floats = 48 * 1024 / sizeof(float);

/// Threads per block: up to one per head (at most 128), fewer when the per-thread windows would
/// not fit in shared memory.
inline int view_block_size(const view_shared_layout& shared, std::int64_t heads) {
  int block = heads >= 128 ? 128 : static_cast<int>(heads);
  while (block > 1 && shared.floats(block) > shared_budget_floats) block = block > 32 ? block - 32 : block / 2;
  if (shared.floats(block) > shared_budget_floats)
    throw input_error("encoding: its view needs " + std::to_string(shared.floats(1) * 4) +
                      " bytes of shared memory per token, more than a block's 48 KiB");
  return block;
}

template <class T, class View, layout_kind Q, layout_kind K>
void launch_view(const kernel::rotate_plan& p, const View& view, std::int64_t max_position,
                 int* error_flag, cudaStream_t stream) {
  const std::int64_t heads = p.q.heads + p.k.heads;
  if (p.total_tokens == 0 || heads == 0) return;
  const view_shared_layout shared = shared_layout_of(view);
  const int block = view_block_size(shared, heads);
  const encode_token_thread<T, View, Q, K> f{p, view, shared, max_position, error_flag};
  launch_two_phase(f, p.total_tokens, block, shared.floats(block) * sizeof(float), stream, "rotate_qk of a view");
}

template <class R, layout_kind Q, layout_kind K>
void encode(const device_encoding<R, Q, K>& enc, const kernel::rotate_qk_args& args, std::int64_t total_tokens,
            int* device_error_flag, cudaStream_t stream, bool backward) {
  if (const rotary_spec* spec = enc.plane_spec())  // rotation planes: the chunked kernel
    return backward ? cuda::rotate_qk_backward(*spec, *enc.plane_tables(), args, total_tokens, device_error_flag, stream)
                    : cuda::rotate_qk(*spec, *enc.plane_tables(), args, total_tokens, device_error_flag, stream);
  check_device_call(args, device_error_flag);
  const kernel::device_indices device{total_tokens};
  kernel::rotate_plan p = kernel::make_instance_plan(enc.shape(), args, &device).plan;
  p.sin_sign = backward ? -1.0f : 1.0f;
  using V = typename device_encoding<R, Q, K>::view_type;
  switch (args.type) {
    case kernel::dtype::f32: return launch_view<float, V, Q, K>(p, enc.view(), args.max_position, device_error_flag, stream);
    case kernel::dtype::f16: return launch_view<__half, V, Q, K>(p, enc.view(), args.max_position, device_error_flag, stream);
    case kernel::dtype::bf16:
      return launch_view<__nv_bfloat16, V, Q, K>(p, enc.view(), args.max_position, device_error_flag, stream);
  }
}

}  // namespace detail

/// Encodes Q (ρ) and K (κ) of the instance on the device; total_tokens is required with
/// cu_seqlens (device memory is not read on the host). Q/K layouts, strides, varlen, ids or
/// offsets, GQA and f32/f16/bf16 as the CPU call; the fused QK-norm and KV-cache write are CPU-only.
template <class R, layout_kind Q, layout_kind K>
void rotate_qk(const device_encoding<R, Q, K>& enc, const kernel::rotate_qk_args& args, std::int64_t total_tokens,
               int* device_error_flag, cudaStream_t stream) {
  detail::encode(enc, args, total_tokens, device_error_flag, stream, /*backward=*/false);
}

/// Backward: reads dL/d(out) through args' in pointers, writes dL/d(in) through out (ρ(c)ᵀ, κ(c)ᵀ).
template <class R, layout_kind Q, layout_kind K>
void rotate_qk_backward(const device_encoding<R, Q, K>& enc, const kernel::rotate_qk_args& args,
                        std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream) {
  detail::encode(enc, args, total_tokens, device_error_flag, stream, /*backward=*/true);
}

}  // namespace grape::cuda

/// The instance rotation's kernels for representation R with layout L on Q and K, forward and
/// backward: one line in a .cu file (C++20) for a representation cuda::attention's host code
/// (attention_cuda.hpp) rotates through its view.
#define GRAPE_CUDA_ENCODE_QK(R, L)                                                                          \
  namespace grape::cuda {                                                                                   \
  template void rotate_qk(const device_encoding<R, layout_kind::L, layout_kind::L>&, const kernel::rotate_qk_args&, \
                          std::int64_t, int*, cudaStream_t);                                                \
  template void rotate_qk_backward(const device_encoding<R, layout_kind::L, layout_kind::L>&,               \
                                   const kernel::rotate_qk_args&, std::int64_t, int*, cudaStream_t);           \
  }
