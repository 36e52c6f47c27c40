#pragma once
// The per-token body of rotate_qk: locate the token, build its cos/sin table once (exact phase →
// sincos_of_phase, or rows of the float32 cache), then rotate every head of Q and K with it.
// Templated on storage type, compile-time rotary dim (0 = run time) and layout, so the inner loop
// over planes is a fixed-trip, contiguous, vectorizable loop.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/rotate_qk_addressing.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "grape/config.hpp"
#include "cpu/storage_io.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

namespace grape::cpu::detail {

inline constexpr int max_axes = 8;

/// Fills table[0, half) with factor·cos and table[half, 2·half) with ±factor·sin of the token's
/// plane angles. Returns the table to use (a cache row directly when no copy is needed).
template <int RotaryDim>
inline const float* token_table(const rotate_plan& p, std::int64_t token, token_place place,
                                float* table) {
  const int rd = RotaryDim > 0 ? RotaryDim : p.rotary_dim;
  const int half = rd / 2;
  if (p.plane_axis == nullptr) {
    const std::int64_t m = position_of(p, token, place, 0);
    if (p.cache != nullptr) {
      const float* row = p.cache + (m - p.cache_first) * rd;
      if (p.sin_sign > 0) return row;
      for (int i = 0; i < half; ++i) table[i] = row[i];
      for (int i = 0; i < half; ++i) table[half + i] = -row[half + i];
      return table;
    }
    const float scale_cos = p.attention_factor, scale_sin = p.sin_sign * p.attention_factor;
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const math::sin_cos sc = math::sincos_of_phase(math::phase_at(m, p.turn_fractions[i]));
      table[i] = scale_cos * sc.cos;
      table[half + i] = scale_sin * sc.sin;
    }
    return table;
  }
  std::int64_t axis_pos[max_axes];
  for (int a = 0; a < p.num_axes; ++a) axis_pos[a] = position_of(p, token, place, a);
  for (int i = 0; i < half; ++i) {
    const std::int64_t m = axis_pos[p.plane_axis[i]];
    if (p.cache != nullptr) {
      const float* row = p.cache + (m - p.cache_first) * rd;
      table[i] = row[i];
      table[half + i] = p.sin_sign * row[half + i];
    } else {
      const math::sin_cos sc = math::sincos_of_phase(math::phase_at(m, p.turn_fractions[i]));
      table[i] = p.attention_factor * sc.cos;
      table[half + i] = p.sin_sign * p.attention_factor * sc.sin;
    }
  }
  return table;
}

/// The rotation of one plane block, in float: y = rotate(x) for rotary_dim channels.
template <int RotaryDim, math::layout_kind Layout>
inline void rotate_block(const float* x, float* y, const float* __restrict table, int rd) {
  const int half = rd / 2;
  const float* cs = table;
  const float* sn = table + half;
  if constexpr (Layout == math::layout_kind::half_split) {
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const float x0 = x[i], x1 = x[i + half];
      y[i] = x0 * cs[i] - x1 * sn[i];
      y[i + half] = x1 * cs[i] + x0 * sn[i];
    }
  } else {
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const float x0 = x[2 * i], x1 = x[2 * i + 1];
      y[2 * i] = x0 * cs[i] - x1 * sn[i];
      y[2 * i + 1] = x1 * cs[i] + x0 * sn[i];
    }
  }
}

/// All heads of one operand for one token. The table is __restrict: the compiler then keeps it
/// in registers across heads instead of reloading it after every store to Q/K (reloads that the
/// CPU may also order falsely behind those stores when addresses match modulo 4 KiB; measured:
/// 0.55 → 0.9 of the memory baseline). Kept out of line because GCC drops the __restrict
/// guarantee of a parameter once the function is inlined. Each iteration reads channels before
/// writing the same channels, so in == out is safe.
template <class Storage, int RotaryDim, math::layout_kind Layout>
[[gnu::noinline]] void rotate_heads(const Storage* in, Storage* out, std::int64_t heads,
                         std::int64_t head_stride, const float* __restrict table, int rotary_dim,
                         int head_dim) {
  const int rd = RotaryDim > 0 ? RotaryDim : rotary_dim;
  for (std::int64_t h = 0; h < heads; ++h) {
    const Storage* x = in + h * head_stride;
    Storage* y = out + h * head_stride;
    if constexpr (std::is_same_v<Storage, float>) {
      rotate_block<RotaryDim, Layout>(x, y, table, rd);
    } else if constexpr (RotaryDim > 0) {
      // Widen, rotate, narrow: vectorized conversions (storage_io.hpp).
      alignas(64) float xs[RotaryDim];
      alignas(64) float ys[RotaryDim];
      widen<Storage, RotaryDim>(x, xs);
      rotate_block<RotaryDim, Layout>(xs, ys, table, rd);
      narrow<Storage, RotaryDim>(ys, y);
    } else {
      const int half = rd / 2;
      for (int i = 0; i < half; ++i) {
        const int c0 = math::first_channel(Layout, i, rd), c1 = math::second_channel(Layout, i, rd);
        const float x0 = static_cast<float>(x[c0]), x1 = static_cast<float>(x[c1]);
        const math::pair2<float> r = math::rotate_pair(x0, x1, table[half + i], table[i]);
        y[c0] = static_cast<Storage>(r.first);
        y[c1] = static_cast<Storage>(r.second);
      }
    }
  }
  // Pass-through channels in a separate loop: a call inside the loop above would stop the table
  // from staying in registers.
  if (static_cast<const void*>(in) != static_cast<const void*>(out) && head_dim > rd)
    for (std::int64_t h = 0; h < heads; ++h)
      std::memcpy(out + h * head_stride + rd, in + h * head_stride + rd,
                  sizeof(Storage) * static_cast<std::size_t>(head_dim - rd));
}

/// The work item: one token, all heads of Q and K.
template <class Storage, int RotaryDim, math::layout_kind Layout>
struct rotate_token {
  rotate_plan p;

  void operator()(std::int64_t token, float* scratch) const {
    const token_place place = locate_token(p, token);
    const float* table = token_table<RotaryDim>(p, token, place, scratch);
    for (const qk_operand* t : {&p.q, &p.k}) {
      if (t->heads == 0) continue;
      const std::int64_t base = token_offset(*t, p, token, place);
      rotate_heads<Storage, RotaryDim, Layout>(static_cast<const Storage*>(t->in) + base,
                                               static_cast<Storage*>(t->out) + base, t->heads,
                                               t->head_stride, table, p.rotary_dim, p.head_dim);
    }
  }
};

}  // namespace grape::cpu::detail
