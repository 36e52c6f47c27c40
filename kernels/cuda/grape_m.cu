// GRAPE-M's per-head and contextual rotations and their parameter gradients on the device: every
// dtype and layout in one translation unit (small bodies; the launch shape is planned on the host,
// grape_m_call.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/grape_m_call.hpp"
#include "cuda/launch.cuh"

namespace grape::cuda::detail {
namespace {

/// The forward body, or the gradients' (Grads), for storage T and a layout.
template <bool Grads, class T, math::layout_kind L>
struct body {
  using type = grape_m_token_thread<T, L>;
};
template <class T, math::layout_kind L>
struct body<true, T, L> {
  using type = grape_m_grads_thread<T, L>;
};

template <bool Grads, class T, math::layout_kind L, class Launch>
void launch_as(const Launch& l, std::int64_t tokens, cudaStream_t stream) {
  const typename body<Grads, T, L>::type f{l.call};
  launch_two_phase(f, tokens, l.block, l.shared_bytes(), stream, Grads ? "GRAPE-M's gradients" : "GRAPE-M");
}

template <bool Grads, class Launch>
void launch_any(const Launch& l, const kernel::rotate_plan& p, kernel::dtype type, math::layout_kind layout,
                cudaStream_t stream) {
  if (p.total_tokens == 0 || p.q.heads + p.k.heads == 0) return;
  const bool half = layout == math::layout_kind::half_split;
  constexpr auto H = math::layout_kind::half_split, I = math::layout_kind::interleaved;
  switch (type) {
    case kernel::dtype::f32:
      return half ? launch_as<Grads, float, H>(l, p.total_tokens, stream) : launch_as<Grads, float, I>(l, p.total_tokens, stream);
    case kernel::dtype::f16:
      return half ? launch_as<Grads, __half, H>(l, p.total_tokens, stream) : launch_as<Grads, __half, I>(l, p.total_tokens, stream);
    case kernel::dtype::bf16:
      return half ? launch_as<Grads, __nv_bfloat16, H>(l, p.total_tokens, stream)
                  : launch_as<Grads, __nv_bfloat16, I>(l, p.total_tokens, stream);
  }
}

}  // namespace

void launch_grape_m(const grape_m_launch& l, kernel::dtype type, math::layout_kind layout, cudaStream_t stream) {
  launch_any<false>(l, l.call.p, type, layout, stream);
}

void launch_grape_m_grads(const grape_m_grads_launch& l, kernel::dtype type, math::layout_kind layout,
                          cudaStream_t stream) {
  launch_any<true>(l, l.call.c.p, type, layout, stream);
}

}  // namespace grape::cuda::detail
