#pragma once
// Addressing of a validated rotate_qk plan: which sequence a flat token belongs to, where its row
// starts, its position on each axis, and one plane's entry of its cos/sin table. Device-safe (no
// Eigen, no std containers), so the CPU per-token body and the CUDA per-thread body share it.
#include <cstdint>

#include "common/rotate_plan.hpp"
#include "grape/config.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/sincos.hpp"

namespace grape::kernel {

/// Where a flat token index sits: sequence b, index s within it, element offset of its row.
struct token_place {
  std::int64_t batch;
  std::int64_t index;
};

GRAPE_HOST_DEVICE inline token_place locate_token(const rotate_plan& p, std::int64_t token) {
  if (p.cu_seqlens == nullptr) return {token / p.seq_len, token % p.seq_len};
  // Largest b with cu_seqlens[b] <= token (cu_seqlens is validated non-decreasing).
  std::int64_t lo = 0, hi = p.batch;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (p.cu_seqlens[mid] <= token) lo = mid; else hi = mid;
  }
  return {lo, token - p.cu_seqlens[lo]};
}

GRAPE_HOST_DEVICE inline std::int64_t token_offset(const qk_operand& t, const rotate_plan& p, std::int64_t token,
                                 token_place place) {
  return p.cu_seqlens == nullptr ? place.batch * t.batch_stride + place.index * t.token_stride
                                 : token * t.token_stride;
}

GRAPE_HOST_DEVICE inline std::int64_t position_of(const rotate_plan& p, std::int64_t token, token_place place,
                                int axis) {
  if (p.position_ids != nullptr) {
    const std::int64_t at = static_cast<std::int64_t>(axis) * p.total_tokens + token;
    return p.position_type == index_type::i64
               ? static_cast<const std::int64_t*>(p.position_ids)[at]
               : static_cast<const std::int32_t*>(p.position_ids)[at];
  }
  return p.offsets != nullptr ? p.offsets[place.batch] + place.index : place.index;
}

/// The position on `axis` of the first token of the token's sequence.
GRAPE_HOST_DEVICE inline std::int64_t sequence_start_position(const rotate_plan& p, token_place place, int axis) {
  const std::int64_t first = p.cu_seqlens ? p.cu_seqlens[place.batch] : place.batch * p.seq_len;
  return position_of(p, first, {place.batch, 0}, axis);
}

/// A token's position on `axis` counted from `origin` (rotate_qk_inv_freq_grad's).
GRAPE_HOST_DEVICE inline std::int64_t position_from(const rotate_plan& p, std::int64_t token, token_place place,
                                                    int axis, position_origin origin) {
  const std::int64_t m = position_of(p, token, place, axis);
  return origin == position_origin::sequence_start ? m - sequence_start_position(p, place, axis) : m;
}

/// Plane i of a token at position m: table[i] = af·cos, table[half + i] = ±af·sin, from the
/// cache row of m or from the exact phase.
GRAPE_HOST_DEVICE inline void fill_table_plane(const rotate_plan& p, int i, std::int64_t m,
                                               float* table) {
  const int half = p.rotary_dim / 2;
  if (p.cache != nullptr) {
    const float* row = p.cache + (m - p.cache_first) * p.rotary_dim;
    table[i] = row[i];
    table[half + i] = p.sin_sign * row[half + i];
  } else {
    const math::sin_cos sc = math::sincos_of_phase(math::phase_at(m, p.turn_fractions[i]));
    table[i] = p.attention_factor * sc.cos;
    table[half + i] = p.sin_sign * p.attention_factor * sc.sin;
  }
}

}  // namespace grape::kernel
