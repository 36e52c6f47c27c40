#pragma once
// What every fused body (rotation planes: rotate_qk_fused_item.hpp; any representation:
// encode_qk_item.hpp) does around the encoding itself: the per-head RMSNorm in float32 scratch,
// the address of a head in a paged cache slot, and the copy of a token's V heads to its slot.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/rotate_addressing.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/rotate_qk_plan.hpp"

namespace grape::cpu::detail {

/// buf ← buf / sqrt(mean(buf²) + eps) · weight, over d channels.
inline void rms_norm_in_place(float* buf, int d, const float* weight, float eps) {
  float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
  for (int c = 0; c < d; ++c) squares += buf[c] * buf[c];
  const float inv_rms = 1.0f / std::sqrt(squares / static_cast<float>(d) + eps);
#pragma omp simd
  for (int c = 0; c < d; ++c) buf[c] *= inv_rms * weight[c];
}

/// Head h of slot `slot` in a paged cache.
template <class Storage>
inline Storage* cache_head(const rotate_plan& p, const cache_operand& c, std::int64_t slot,
                           std::int64_t h) {
  const std::int64_t bs = p.fused.block_size;
  return static_cast<Storage*>(c.data) + (slot / bs) * c.block_stride + (slot % bs) * c.slot_stride +
         h * c.head_stride;
}

/// V heads of a cached token, copied unchanged to its slot (nothing when V is not cached or the
/// token is skipped).
template <class Storage>
inline void copy_values(const rotate_plan& p, std::int64_t token, token_place place, std::int64_t slot) {
  const fused_plan& f = p.fused;
  if (slot < 0 || f.v_cache.data == nullptr) return;
  const auto* in = static_cast<const Storage*>(f.v.in) + token_offset(f.v, p, token, place);
  const auto head_bytes = sizeof(Storage) * static_cast<std::size_t>(p.head_dim);
  if (f.v.head_stride == p.head_dim && f.v_cache.head_stride == p.head_dim) {  // one row
    std::memcpy(cache_head<Storage>(p, f.v_cache, slot, 0), in,
                head_bytes * static_cast<std::size_t>(f.v.heads));
    return;
  }
  for (std::int64_t h = 0; h < f.v.heads; ++h)
    std::memcpy(cache_head<Storage>(p, f.v_cache, slot, h), in + h * f.v.head_stride, head_bytes);
}

}  // namespace grape::cpu::detail
