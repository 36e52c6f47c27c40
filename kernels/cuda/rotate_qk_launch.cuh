#pragma once
// Host launch code shared by the per-dtype translation units (rotate_qk_f32.cu, ...).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/launch.cuh"
#include "cuda/rotate_qk_call.hpp"
#include "cuda/rotate_qk_thread.hpp"

namespace grape::cuda::detail {

template <class T, int V, math::layout_kind L>
void launch_with(const rotate_call& r) {
  const auto& p = r.plan;
  unit_counts units{p.rotary_dim / (2 * V), (p.head_dim - p.rotary_dim) / V};
  rotate_token_thread<T, V, L> f{p, units, r.max_position, r.cache_rows, r.error_flag};
  const std::int64_t total = (p.q.heads + p.k.heads) * units.per_head();
  const int block = total >= 256 ? 256 : static_cast<int>((total + 31) / 32 * 32);
  if (r.total_tokens == 0 || total == 0) return;
  launch_two_phase(f, r.total_tokens, block, p.rotary_dim * sizeof(float), r.stream, "rotate_qk");
}

template <class T>
void launch_typed(const rotate_call& r) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const bool half_split = r.plan.layout == math::layout_kind::half_split;
  if (r.vectorized) half_split ? launch_with<T, V, math::layout_kind::half_split>(r) : launch_with<T, V, math::layout_kind::interleaved>(r);
  else half_split ? launch_with<T, 1, math::layout_kind::half_split>(r) : launch_with<T, 1, math::layout_kind::interleaved>(r);
}

}  // namespace grape::cuda::detail
