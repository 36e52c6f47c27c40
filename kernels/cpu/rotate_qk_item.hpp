#pragma once
// The per-token body of rotate_qk: locate the token, build its cos/sin table once (exact phase →
// sincos_of_phase, or rows of the float32 cache), then rotate every head of Q and K with it.
// Templated on storage type, compile-time rotary dim (0 = run time) and layout, so the inner loop
// over planes is a fixed-trip, contiguous, vectorizable loop.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/rotate_addressing.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "grape/config.hpp"
#include "cpu/storage_io.hpp"
#include "cpu/stream_store.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

namespace grape::cpu::detail {

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
  std::int64_t axis_pos[max_position_axes];
  for (int a = 0; a < p.num_axes; ++a) axis_pos[a] = position_of(p, token, place, a);
  for (int i = 0; i < half; ++i) fill_table_plane(p, i, axis_pos[p.plane_axis[i]], table);
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

/// Whether the packet rotation serves (Storage, RotaryDim, Layout): a compile-time dim that is a
/// whole number of packets (half of it, for half-split). Streaming stores exist only here (the
/// plan streams only at the specialised dims).
template <class Storage, int RotaryDim, math::layout_kind Layout>
inline constexpr bool packet_rotation = [] {
  using P = storage_packets<Storage>;
  if constexpr (RotaryDim <= 0 || !P::vectorized) return false;
  else if constexpr (Layout == math::layout_kind::half_split) return (RotaryDim / 2) % P::width == 0;
  else return RotaryDim % P::width == 0 && P::pairs_swappable;
}();

/// A token's cos/sin table as packets, loaded once and kept in registers for all its heads
/// (rotary dim 128, AVX-512: 8 zmm half-split, 16 interleaved).
///   half-split:  cos[j], sin[j] hold planes j·W … j·W+W−1.
///   interleaved: channel-wise, cos = (c0 c0 c1 c1 …) and sin = (−s0 s0 −s1 s1 …), so that
///                y = x·cos + swap_pairs(x)·sin.
template <class Storage, int RotaryDim, math::layout_kind Layout>
struct packet_table {
  using P = storage_packets<Storage>;
  using F = typename P::wide;
  static constexpr int half = RotaryDim / 2;
  static constexpr int count = (Layout == math::layout_kind::half_split ? half : RotaryDim) / P::width;
  F cos[count];
  F sin[count];

  explicit packet_table(const float* table) {
    namespace ei = Eigen::internal;
    if constexpr (Layout == math::layout_kind::half_split) {
#pragma GCC unroll 16
      for (int j = 0; j < count; ++j) {
        cos[j] = ei::ploadu<F>(table + j * P::width);
        sin[j] = ei::ploadu<F>(table + half + j * P::width);
      }
    } else {
      alignas(64) float c[RotaryDim];
      alignas(64) float sn[RotaryDim];
      for (int i = 0; i < half; ++i) {
        c[2 * i] = c[2 * i + 1] = table[i];
        sn[2 * i] = -table[half + i];
        sn[2 * i + 1] = table[half + i];
      }
#pragma GCC unroll 16
      for (int j = 0; j < count; ++j) {
        cos[j] = ei::pload<F>(c + j * P::width);
        sin[j] = ei::pload<F>(sn + j * P::width);
      }
    }
  }
};

/// The packet rotation, shared by every packet body. Half-split: x0 holds channels of the first
/// half, x1 the matching channels of the second; y0 = x0·cos − x1·sin, y1 = x1·cos + x0·sin (two
/// functions, so a caller can store y0 before computing y1).
template <class F>
inline F rotate_split_first(const F& x0, const F& x1, const F& cos, const F& sin) {
  namespace ei = Eigen::internal;
  return ei::pmadd(x0, cos, ei::pnegate(ei::pmul(x1, sin)));
}

template <class F>
inline F rotate_split_second(const F& x0, const F& x1, const F& cos, const F& sin) {
  namespace ei = Eigen::internal;
  return ei::pmadd(x1, cos, ei::pmul(x0, sin));
}

/// Interleaved: pairs sit side by side, cos = (c0 c0 c1 c1 …), sin = (−s0 s0 −s1 s1 …).
template <class F>
inline F rotate_interleaved_packet(const F& x, const F& cos, const F& sin) {
  namespace ei = Eigen::internal;
  return ei::pmadd(x, cos, ei::pmul(swap_pairs(x), sin));
}

/// One head in packets: each packet of channels is loaded (widened from 16-bit storage), rotated
/// and stored (narrowed) in registers, with ordinary or streaming stores. Same arithmetic as
/// rotate_block: y0 = fma(x0, cos, −x1·sin), y1 = fma(x1, cos, x0·sin). In place is safe: each
/// packet is read before it is written.
template <class Storage, int RotaryDim, math::layout_kind Layout, bool Stream>
inline void rotate_packets(const Storage* x, Storage* y,
                           const packet_table<Storage, RotaryDim, Layout>& t) {
  namespace ei = Eigen::internal;
  using P = storage_packets<Storage>;
  using S = typename P::storage;
  using F = typename P::wide;
  const auto store = [](Storage* to, const F& v) {
    if constexpr (Stream) stream_packet(to, ei::pcast<F, S>(v));
    else ei::pstoreu(to, ei::pcast<F, S>(v));
  };
  if constexpr (Layout == math::layout_kind::half_split) {
    constexpr int half = RotaryDim / 2;
#pragma GCC unroll 16
    for (int j = 0; j < t.count; ++j) {
      const int i = j * P::width;
      const F x0 = ei::pcast<S, F>(ei::ploadu<S>(x + i));
      const F x1 = ei::pcast<S, F>(ei::ploadu<S>(x + half + i));
      store(y + i, rotate_split_first(x0, x1, t.cos[j], t.sin[j]));
      store(y + half + i, rotate_split_second(x0, x1, t.cos[j], t.sin[j]));
    }
  } else {
#pragma GCC unroll 16
    for (int j = 0; j < t.count; ++j) {
      const int i = j * P::width;
      const F v = ei::pcast<S, F>(ei::ploadu<S>(x + i));
      store(y + i, rotate_interleaved_packet(v, t.cos[j], t.sin[j]));
    }
  }
}

/// One head through the float path: rotary_dim channels from x to y (in == out allowed: every
/// step reads its channels before writing them).
template <class Storage, int RotaryDim, math::layout_kind Layout>
inline void rotate_head(const Storage* x, Storage* y, const float* __restrict table, int rd) {
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

/// The heads of one operand at one token.
template <class Storage>
struct head_run {
  const Storage* in;
  Storage* out;
  std::int64_t heads;
  std::int64_t head_stride;
};

/// Every head of Q and K at one token.
///
/// At the specialised dims (64/128/256), Q and K take turns, 2 KiB of heads at a time, so that
/// two memory streams are in flight instead of one. Turns of 2 KiB beat both 4 KiB and 1 KiB in
/// paired comparisons (docs/performance.md). float uses the float path (rotate_block); 16-bit
/// storage, and every streaming call, the packet path with the table loaded into registers once
/// (packet_table). Other dims: all of Q, then all of K, through the float path.
///
/// The table must not be reloaded between stores to Q/K: those reloads are ordered falsely
/// behind stores whose addresses match modulo 4 KiB, which keeps the kernel far below the memory
/// baseline (docs/performance.md). Hence packet_table, and on the float path a
/// __restrict table in this out-of-line function (GCC drops the guarantee of a parameter once
/// the function is inlined). Stream: the rotated channels are written with non-temporal stores
/// (the plan proved the alignment).
template <class Storage, int RotaryDim, math::layout_kind Layout, bool Stream>
[[gnu::noinline]] void rotate_token_heads(head_run<Storage> q, head_run<Storage> k,
                                          const float* __restrict table, int rotary_dim,
                                          int head_dim) {
  const int rd = RotaryDim > 0 ? RotaryDim : rotary_dim;
  constexpr std::int64_t turn_bytes = 2048;
  constexpr std::int64_t turn = std::max<std::int64_t>(
      1, turn_bytes / (static_cast<std::int64_t>(sizeof(Storage)) * std::max(RotaryDim, 1)));
  if constexpr (std::is_same_v<Storage, float> && RotaryDim > 0 && !Stream) {
    if (q.in == q.out && k.in == k.out) {
      // One pointer for loads and stores: the compiler then knows which loads a store cannot
      // touch and schedules them early. Written out here on purpose: the same loops in an inline
      // helper run well below the baseline (docs/performance.md).
      for (std::int64_t h0 = 0; h0 < q.heads || h0 < k.heads; h0 += turn) {
        for (std::int64_t h = h0; h < h0 + turn && h < q.heads; ++h) {
          float* x = q.out + h * q.head_stride;
          rotate_block<RotaryDim, Layout>(x, x, table, rd);
        }
        for (std::int64_t h = h0; h < h0 + turn && h < k.heads; ++h) {
          float* x = k.out + h * k.head_stride;
          rotate_block<RotaryDim, Layout>(x, x, table, rd);
        }
      }
    } else {
      for (std::int64_t h0 = 0; h0 < q.heads || h0 < k.heads; h0 += turn) {
        for (std::int64_t h = h0; h < h0 + turn && h < q.heads; ++h)
          rotate_block<RotaryDim, Layout>(q.in + h * q.head_stride, q.out + h * q.head_stride,
                                          table, rd);
        for (std::int64_t h = h0; h < h0 + turn && h < k.heads; ++h)
          rotate_block<RotaryDim, Layout>(k.in + h * k.head_stride, k.out + h * k.head_stride,
                                          table, rd);
      }
    }
  } else if constexpr (packet_rotation<Storage, RotaryDim, Layout>) {
    const packet_table<Storage, RotaryDim, Layout> t(table);
    for (std::int64_t h0 = 0; h0 < q.heads || h0 < k.heads; h0 += turn) {
      for (std::int64_t h = h0; h < h0 + turn && h < q.heads; ++h)
        rotate_packets<Storage, RotaryDim, Layout, Stream>(q.in + h * q.head_stride,
                                                           q.out + h * q.head_stride, t);
      for (std::int64_t h = h0; h < h0 + turn && h < k.heads; ++h)
        rotate_packets<Storage, RotaryDim, Layout, Stream>(k.in + h * k.head_stride,
                                                           k.out + h * k.head_stride, t);
    }
  } else {
    static_assert(!Stream, "grape: streaming stores need the packet rotation");
    for (const head_run<Storage>& r : {q, k})
      for (std::int64_t h = 0; h < r.heads; ++h)
        rotate_head<Storage, RotaryDim, Layout>(r.in + h * r.head_stride,
                                                r.out + h * r.head_stride, table, rd);
  }
  // Pass-through channels in a separate loop: a call inside the loops above would stop the table
  // from staying in registers.
  if (head_dim > rd)
    for (const head_run<Storage>& r : {q, k})
      if (static_cast<const void*>(r.in) != static_cast<const void*>(r.out))
        for (std::int64_t h = 0; h < r.heads; ++h)
          std::memcpy(r.out + h * r.head_stride + rd, r.in + h * r.head_stride + rd,
                      sizeof(Storage) * static_cast<std::size_t>(head_dim - rd));
}

/// The work item: one token, all heads of Q and K.
template <class Storage, int RotaryDim, math::layout_kind Layout>
struct rotate_token {
  rotate_plan p;

  void operator()(std::int64_t token, float* scratch) const {
    const token_place place = locate_token(p, token);
    const float* table = token_table<RotaryDim>(p, token, place, scratch);
    const head_run<Storage> q = run_of(p.q, token, place), k = run_of(p.k, token, place);
    if constexpr (packet_rotation<Storage, RotaryDim, Layout>) {
      if (p.stream_stores) {
        rotate_token_heads<Storage, RotaryDim, Layout, true>(q, k, table, p.rotary_dim, p.head_dim);
        return;
      }
    }
    rotate_token_heads<Storage, RotaryDim, Layout, false>(q, k, table, p.rotary_dim, p.head_dim);
  }

  head_run<Storage> run_of(const qk_operand& t, std::int64_t token, token_place place) const {
    if (t.heads == 0) return {nullptr, nullptr, 0, 0};
    const std::int64_t base = token_offset(t, p, token, place);
    return {static_cast<const Storage*>(t.in) + base, static_cast<Storage*>(t.out) + base,
            t.heads, t.head_stride};
  }

  /// After a thread's last item: its streaming stores become visible before the call returns.
  void finish_thread() const {
    if (p.stream_stores) stream_fence();
  }
};

}  // namespace grape::cpu::detail
