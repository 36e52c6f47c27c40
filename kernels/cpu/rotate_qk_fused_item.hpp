#pragma once
// The per-token body of a fused rotate_qk call (QK-norm and/or KV-cache write): each head is
// read once, normalised (RMSNorm over its head_dim channels, when the plan has weights for its
// operand), rotated with the token's table and written once, rounded to the storage type a single
// time, to its output and/or its cache slot; V heads are copied to the same slot. At the
// specialised dims with full rotary a head stays in registers (fused_head_packets); otherwise it
// goes through float32 scratch (transform_head). The plain rotation (rotate_qk_item.hpp) stays a
// separate body: its speed depends on a loop shape this one does not have.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/fused_head_io.hpp"
#include "cpu/rotate_qk_item.hpp"
#include "cpu/storage_io.hpp"

namespace grape::cpu::detail {

/// An operand's RMSNorm multipliers as packets, loaded once per token so that they stay in
/// registers for all its heads (like packet_table; see rotate_token_heads on why reloads hurt).
template <class Storage, int HeadDim>
struct packet_norm {
  using F = typename storage_packets<Storage>::wide;
  static constexpr int count = HeadDim / storage_packets<Storage>::width;
  F w[count];
  packet_norm() = default;
  explicit packet_norm(const float* weights) {
#pragma GCC unroll 16
    for (int j = 0; j < count; ++j)
      w[j] = Eigen::internal::ploadu<F>(weights + j * storage_packets<Storage>::width);
  }
};

/// One whole head in registers (head_dim == RotaryDim, a whole number of packets): load and
/// widen, RMSNorm (norm: the [head_dim] multipliers, or null), rotate with the token's packet
/// table, narrow and store to y and y2 (either may be null; y may equal x).
template <class Storage, int RotaryDim, math::layout_kind Layout, bool Norm>
inline void fused_head_packets(const Storage* x, Storage* y, Storage* y2,
                               const packet_norm<Storage, RotaryDim>& norm, float eps,
                               const packet_table<Storage, RotaryDim, Layout>& t) {
  namespace ei = Eigen::internal;
  using P = storage_packets<Storage>;
  using S = typename P::storage;
  using F = typename P::wide;
  constexpr int n = RotaryDim / P::width;
  static_assert(n >= 2 && n % 2 == 0, "grape: a fused head is an even number of packets");
  F v[n];
#pragma GCC unroll 16
  for (int j = 0; j < n; ++j) v[j] = ei::pcast<S, F>(ei::ploadu<S>(x + j * P::width));
  // RMSNorm commutes with the rotation up to its scalar: y = inv_rms · R(w ⊙ x). So the rotation
  // of w ⊙ x does not wait for the reduction, and the sum of squares is a tree, not a chain:
  // the head's latency decides how many heads are in flight, and so the memory parallelism
  // (docs/performance.md: what the reduction costs, and a two-pass variant that lost).
  F inv_rms = ei::pset1<F>(1.0f);
  if constexpr (Norm) {
    F part[2] = {ei::pmul(v[0], v[0]), ei::pmul(v[1], v[1])};
#pragma GCC unroll 16
    for (int j = 2; j < n; ++j) part[j % 2] = ei::pmadd(v[j], v[j], part[j % 2]);
    inv_rms = ei::pset1<F>(1.0f / std::sqrt(ei::predux(ei::padd(part[0], part[1])) / RotaryDim + eps));
#pragma GCC unroll 16
    for (int j = 0; j < n; ++j) v[j] = ei::pmul(v[j], norm.w[j]);
  }
  F r[n];
  if constexpr (Layout == math::layout_kind::half_split) {
#pragma GCC unroll 16
    for (int j = 0; j < n / 2; ++j) {
      r[j] = rotate_split_first(v[j], v[j + n / 2], t.cos[j], t.sin[j]);
      r[j + n / 2] = rotate_split_second(v[j], v[j + n / 2], t.cos[j], t.sin[j]);
    }
  } else {
#pragma GCC unroll 16
    for (int j = 0; j < n; ++j) r[j] = rotate_interleaved_packet(v[j], t.cos[j], t.sin[j]);
  }
  if constexpr (Norm)
#pragma GCC unroll 16
    for (int j = 0; j < n; ++j) r[j] = ei::pmul(r[j], inv_rms);
  for (Storage* to : {y, y2})
    if (to != nullptr)
#pragma GCC unroll 16
      for (int j = 0; j < n; ++j) ei::pstoreu(to + j * P::width, ei::pcast<F, S>(r[j]));
}

template <class Storage, int RotaryDim, math::layout_kind Layout>
struct rotate_token_fused {
  rotate_plan p;

  /// Per-thread scratch: the token's table, then one head.
  static int scratch_floats(const rotate_plan& plan) { return plan.rotary_dim + plan.head_dim; }

  /// Where one operand's heads go at one token: y (its out, or null) and y2 (its cache slot, or
  /// null), heads `stride` apart in x and y and `cache_stride` apart in the cache.
  struct operand_heads {
    const Storage* x;
    Storage* y;
    Storage* y2;
    std::int64_t heads, stride, cache_stride;
    const float* norm;
  };

  void operator()(std::int64_t token, float* scratch) const {
    const token_place place = locate_token(p, token);
    const float* table = token_table<RotaryDim>(p, token, place, scratch);
    const fused_plan& f = p.fused;
    const std::int64_t slot = f.write_cache ? f.slots[token] : -1;
    Storage* const k_row = slot >= 0 ? cache_head<Storage>(p, f.k_cache, slot, 0) : nullptr;
    const operand_heads ops[2] = {heads_of(p.q, token, place, nullptr, 0, f.q_norm),
                                  heads_of(p.k, token, place, k_row, f.k_cache.head_stride, f.k_norm)};
    if constexpr (packet_rotation<Storage, RotaryDim, Layout>) {
      if (p.head_dim == RotaryDim) {
        const packet_table<Storage, RotaryDim, Layout> t(table);
        for (const operand_heads& o : ops) {
          if (o.norm != nullptr) {
            const packet_norm<Storage, RotaryDim> n(o.norm);
            for_each_head(o, [&](const Storage* x, Storage* y, Storage* y2) {
              fused_head_packets<Storage, RotaryDim, Layout, true>(x, y, y2, n, f.norm_eps, t);
            });
          } else {
            for_each_head(o, [&](const Storage* x, Storage* y, Storage* y2) {
              fused_head_packets<Storage, RotaryDim, Layout, false>(x, y, y2, {}, f.norm_eps, t);
            });
          }
        }
        copy_values<Storage>(p, token, place, slot);
        return;
      }
    }
    float* head = scratch + p.rotary_dim;
    for (const operand_heads& o : ops)
      for_each_head(o, [&](const Storage* x, Storage* y, Storage* y2) {
        transform_head(x, y, y2, o.norm, table, head);
      });
    copy_values<Storage>(p, token, place, slot);
  }

  /// An operand's heads at one token; cache_row: its cache slot's first head, or null.
  operand_heads heads_of(const qk_operand& t, std::int64_t token, token_place place,
                         Storage* cache_row, std::int64_t cache_stride, const float* norm) const {
    if (t.heads == 0) return {nullptr, nullptr, nullptr, 0, 0, 0, nullptr};
    const std::int64_t base = token_offset(t, p, token, place);
    return {static_cast<const Storage*>(t.in) + base,
            t.out != nullptr ? static_cast<Storage*>(t.out) + base : nullptr,
            cache_row, t.heads, t.head_stride, cache_stride, norm};
  }

  template <class HeadOp>
  static void for_each_head(const operand_heads& o, HeadOp&& head_op) {
    for (std::int64_t h = 0; h < o.heads; ++h)
      head_op(o.x + h * o.stride, o.y ? o.y + h * o.stride : nullptr,
              o.y2 ? o.y2 + h * o.cache_stride : nullptr);
  }

  /// One head: x → [norm] → rotate → y and y2 (either may be null; y may equal x).
  void transform_head(const Storage* x, Storage* y, Storage* y2, const float* norm,
                      const float* __restrict table, float* __restrict buf) const {
    const int d = p.head_dim;
    widen_n(x, buf, d);
    if (norm != nullptr) rms_norm_in_place(buf, d, norm, p.fused.norm_eps);
    rotate_block<RotaryDim, Layout>(buf, buf, table, RotaryDim > 0 ? RotaryDim : p.rotary_dim);
    if (y != nullptr) narrow_n(buf, y, d);
    if (y2 != nullptr) narrow_n(buf, y2, d);
  }
};

}  // namespace grape::cpu::detail
