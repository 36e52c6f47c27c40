#pragma once
// The CUDA flash attention's backward as two block programs (block_program.hpp), from the
// forward's output O and log-sum-exp L, recomputing every tile (no T×T buffer):
//
//   P = exp(scale·QKᵀ + bias − L)  (0 where masked),  D_i = dO_i·O_i,
//   dV = Pᵀ·dO,  dS = P ∘ (dO·Vᵀ − D),  dQ = scale·dS·K,  dK = scale·dSᵀ·Q.
//
// No atomics, so the result does not depend on the order blocks run in: run_keys is a block per
// (key tile, sequence, K/V head) that owns dK and dV of its keys and sums over the query heads of
// its group and every query tile that sees them; run_queries is a block per (query tile,
// sequence, query head) that owns dQ. Each recomputes S and dP (FlashAttention-2 computes them once
// and adds dQ with atomics). P and dS are rounded to the storage type for the tensor-core products,
// as the forward's P is. K and V share their head count (checked on the host).
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda/flash_program.hpp"

namespace grape::cuda {

/// Whether a bias functor gives its parameters' gradient (C++17, as the library's .cu files are
/// compiled).
template <class B, class = void>
struct has_bias_grads : std::false_type {};
template <class B>
struct has_bias_grads<B, std::void_t<decltype(std::declval<const B&>().logit_grad(0, 0, 0, 0.0f, nullptr, nullptr))>>
    : std::true_type {};

/// Byte offsets of either backward program's shared memory; tiles are square (`tile` queries and
/// keys). run_queries keeps dQ where run_keys keeps dK, and does not use dV's.
struct flash_backward_smem {
  std::int64_t k, v, q, dout, p, s, dk, dv, d, lse, walk, bytes;
};

GRAPE_HOST_DEVICE inline flash_backward_smem flash_backward_smem_of(int element_bytes, int tile, int head_dim,
                                                                    int v_dim) {
  flash_backward_smem m{};
  const std::int64_t t = tile;
  m.k = 0;
  m.v = m.k + align32(t * head_dim * element_bytes);
  m.q = m.v + align32(t * v_dim * element_bytes);
  m.dout = m.q + align32(t * head_dim * element_bytes);
  m.p = m.dout + align32(t * v_dim * element_bytes);
  m.s = m.p + align32(t * t * element_bytes);
  m.dk = m.s + align32(t * t * 4);
  m.dv = m.dk + align32(t * head_dim * 4);
  m.d = m.dv + align32(t * v_dim * 4);
  m.lse = m.d + align32(t * 4);
  m.walk = m.lse + align32(t * 4);
  m.bytes = m.walk + align32(2 * t * static_cast<std::int64_t>(sizeof(row_state)));  // a walking bias's, twice
  return m;
}

template <class T, class Bias>
struct flash_backward_program {
  flash_program<T, Bias> f;  // the forward's operands (f.out and f.lse: its output and log-sum-exp)
  const T* grad_out = nullptr;  // dL/dO [tokens, q_heads, v_dim], contiguous
  T* grad_q = nullptr;          // [tokens, q_heads, head_dim], contiguous
  T* grad_k = nullptr;          // [tokens, k_heads, head_dim]
  T* grad_v = nullptr;          // [tokens, k_heads, v_dim]
  int tile = 64;                // queries and keys per tile; threads = 2·tile
  // The bias parameters' gradient (flash_scores.hpp), when row_grads is set: the partials per
  // query [q_heads, tokens, row_slots] and per key [q_heads, tokens, col_slots] (zeroed), or a
  // walking bias's accumulators (accumulator_size doubles, zeroed; col_grads unused), then
  // grad_bias (zeroed, grad_size doubles) from finish_bias_grads.
  double* row_grads = nullptr;
  double* col_grads = nullptr;
  double* grad_bias = nullptr;
  std::int64_t batch = 1;

  /// The views of shared memory both programs use.
  struct tiles {
    T *k, *v, *q, *dout, *p;
    float *s, *dk, *dv, *d, *lse;
    row_state *walk, *grad_walk;  // a walking bias's rows: the bias, and its gradient's running dS
  };
  GRAPE_HOST_DEVICE tiles tiles_of(unsigned char* smem) const {
    const auto at = flash_backward_smem_of(sizeof(T), tile, f.head_dim, f.v_dim);
    return {reinterpret_cast<T*>(smem + at.k),      reinterpret_cast<T*>(smem + at.v),
            reinterpret_cast<T*>(smem + at.q),      reinterpret_cast<T*>(smem + at.dout),
            reinterpret_cast<T*>(smem + at.p),      reinterpret_cast<float*>(smem + at.s),
            reinterpret_cast<float*>(smem + at.dk), reinterpret_cast<float*>(smem + at.dv),
            reinterpret_cast<float*>(smem + at.d),  reinterpret_cast<float*>(smem + at.lse),
            reinterpret_cast<row_state*>(smem + at.walk), reinterpret_cast<row_state*>(smem + at.walk) + tile};
  }

  /// Loads the query tile [i0, i0 + here) of head h: Q, dO, L, and D = rowsum(dO ∘ O).
  GRAPE_HOST_DEVICE void load_queries(const block_shape& b, const tiles& t, std::int64_t start, std::int64_t i0,
                                      int here, std::int64_t h) const {
    load_tile(b, t.q, f.q + (start + i0) * f.q_token_stride + h * f.q_head_stride, f.q_token_stride, tile, here,
              f.head_dim);
    const std::int64_t row = static_cast<std::int64_t>(f.q_heads) * f.v_dim;
    load_tile(b, t.dout, grad_out + (start + i0) * row + h * f.v_dim, row, tile, here, f.v_dim);
    for_threads(b, [&](int r) {
      if (r >= tile) return;
      float d = 0.0f, l = -INFINITY;
      if (r < here) {
        const std::int64_t at = (start + i0 + r) * row + h * f.v_dim;
        for (int c = 0; c < f.v_dim; ++c) d += storage<T>::load(grad_out[at + c]) * storage<T>::load(f.out[at + c]);
        l = f.lse[h * f.tokens + start + i0 + r];
      }
      t.d[r] = d;
      t.lse[r] = l;
      if constexpr (walks_rows<Bias>::value) {  // a fresh walk for every query tile a program loads
        t.walk[r] = Bias::row_start(r < here ? f.position(start, i0 + r) : i0 + r);
        t.grad_walk[r] = Bias::grad_start();
      }
    });
  }

  /// P of the tile from S (t.s, raw dot products) into t.p; masked logits, rows past `rows_here`,
  /// keys past `cols_here` and rows that saw nothing (L = −∞) give 0.
  GRAPE_HOST_DEVICE void probabilities(const block_shape& b, const tiles& t, std::int64_t start, std::int64_t i0,
                                       int rows_here, std::int64_t j0, int cols_here, std::int64_t h) const {
    for_threads(b, [&](int r) {
      if (r >= tile) return;
      const std::int64_t i = i0 + r;
      const auto bias_row = bias_row_of(f.bias, h, r < rows_here ? f.position(start, i) : i, t.walk + r);
      const float l = t.lse[r];
      for (int c = 0; c < tile; ++c) {
        const std::int64_t j = j0 + c;
        float p = 0.0f;
        if (r < rows_here && c < cols_here && l != -INFINITY && f.sees(i, j)) {
          float x = t.s[r * tile + c] * f.scale;
          if constexpr (!Bias::none) x += bias_row(f.position(start, j));
          p = expf(x - l);
        }
        t.p[r * tile + c] = storage<T>::store(p);
      }
    });
  }

  /// The bias gradient's partials of the tile (P in t.p, dP in t.s): g = P·(dP − D) of every
  /// logit added to its query's row slots (rows: the query programs) or its key's column slots.
  GRAPE_HOST_DEVICE void bias_grads(const block_shape& b, const tiles& t, std::int64_t start, std::int64_t i0,
                                    int rows_here, std::int64_t j0, int cols_here, std::int64_t h, bool rows) const {
    if constexpr (walks_rows<Bias>::value) {  // the query programs walk each row up its keys
      if (!row_grads || !rows) return;
      for_threads(b, [&](int r) {
        if (r >= rows_here) return;
        const std::int64_t m = f.position(start, i0 + r);
        for (int c = 0; c < cols_here; ++c) {
          const float g = storage<T>::load(t.p[r * tile + c]) * (t.s[r * tile + c] - t.d[r]);
          if (g != 0.0f) f.bias.key_grad(h, m, f.position(start, j0 + c), g, t.grad_walk[r], row_grads);
        }
      });
    } else if constexpr (has_bias_grads<Bias>::value) {
      if (!row_grads) return;
      const int slots = rows ? f.bias.row_slots() : f.bias.col_slots();
      if (slots == 0) return;
      for_threads(b, [&](int x) {  // a query (rows) or a key (columns) per thread
        if (x >= (rows ? rows_here : cols_here)) return;
        const std::int64_t token = start + (rows ? i0 : j0) + x;
        double* own = (rows ? row_grads : col_grads) + (h * f.tokens + token) * slots;
        for (int y = 0; y < (rows ? cols_here : rows_here); ++y) {
          const int r = rows ? x : y, c = rows ? y : x;
          const float g = storage<T>::load(t.p[r * tile + c]) * (t.s[r * tile + c] - t.d[r]);
          if (g != 0.0f)
            f.bias.logit_grad(h, f.position(start, i0 + r), f.position(start, j0 + c), g, rows ? own : nullptr,
                              rows ? nullptr : own);
        }
      });
    }
  }

  /// The bias parameters' gradient of head h from the partials: every token's slots, in the
  /// call's order (one thread per head: the same sums on every run).
  GRAPE_HOST_DEVICE void finish_bias_grads(std::int64_t h) const {
    if constexpr (walks_rows<Bias>::value) {
      f.bias.finish_grad(h, row_grads, grad_bias);
    } else if constexpr (has_bias_grads<Bias>::value) {
      const int rs = f.bias.row_slots(), cs = f.bias.col_slots();
      for (std::int64_t s = 0; s < batch; ++s) {
        std::int64_t start = 0, len = 0;
        if (!f.sequence_of(s, start, len)) continue;
        for (std::int64_t i = 0; i < len; ++i) {
          const std::int64_t token = (h * f.tokens + start + i);
          f.bias.collect_grad(h, f.position(start, i), row_grads + token * rs, cs ? col_grads + token * cs : nullptr,
                              grad_bias);
        }
      }
      f.bias.close_grad(h, grad_bias);
    }
  }

  /// dS = P ∘ (dP − D) into t.p, from dP in t.s.
  GRAPE_HOST_DEVICE void score_gradient(const block_shape& b, const tiles& t) const {
    for_threads(b, [&](int tid) {
      for (int e = tid; e < tile * tile; e += b.threads)
        t.p[e] = storage<T>::store(storage<T>::load(t.p[e]) * (t.s[e] - t.d[e / tile]));
    });
  }

  /// S = Q·Kᵀ into t.s, then dP = dO·Vᵀ after P is made (the two passes share t.s).
  GRAPE_HOST_DEVICE void scores(const block_shape& b, const tiles& t) const {
    for_warps(b, [&](int w) {
      warp_scores(t.s + 16 * w * tile, tile, t.q + 16 * w * f.head_dim, f.head_dim, t.k, f.head_dim, tile,
                  f.head_dim);
    });
  }
  GRAPE_HOST_DEVICE void output_scores(const block_shape& b, const tiles& t) const {
    for_warps(b, [&](int w) {
      warp_scores(t.s + 16 * w * tile, tile, t.dout + 16 * w * f.v_dim, f.v_dim, t.v, f.v_dim, tile, f.v_dim);
    });
  }

  /// Where tile `block` of `sequence` lies: the sequence's start and length, the tile's first token
  /// and how many of its tokens the sequence has (0: an empty sequence, or a tile past its end).
  struct tile_place {
    std::int64_t start = 0, len = 0, first = 0;
    int here = 0;
  };
  GRAPE_HOST_DEVICE tile_place place_tile(std::int64_t block, std::int64_t sequence) const {
    tile_place p;
    if (!f.sequence_of(sequence, p.start, p.len)) return p;
    p.first = block * tile;
    if (p.first < p.len) p.here = static_cast<int>(p.len - p.first < tile ? p.len - p.first : tile);
    return p;
  }

  /// A block per (key tile, sequence, K/V head g): dK and dV of the tile's keys.
  GRAPE_HOST_DEVICE void run_keys(std::int64_t key_block, std::int64_t sequence, std::int64_t g, const block_shape& b,
                                  unsigned char* smem) const {
    const tile_place at = place_tile(key_block, sequence);
    if (at.here == 0) return;
    const std::int64_t start = at.start, len = at.len, j0 = at.first;
    const int cols_here = at.here;
    const tiles t = tiles_of(smem);
    f.load_keys(b, t.k, t.v, start, j0, tile, cols_here, g, g);
    for_threads(b, [&](int tid) {
      for (int e = tid; e < tile * f.head_dim; e += b.threads) t.dk[e] = 0.0f;
      for (int e = tid; e < tile * f.v_dim; e += b.threads) t.dv[e] = 0.0f;
    });
    // Queries that can see a key of the tile: from the first key (causal) or a window before it, to
    // a window past the last.
    const std::int64_t last = j0 + cols_here - 1;
    std::int64_t i_begin = 0, i_end = len;
    if (f.causal) i_begin = j0;
    else if (f.window > 0 && j0 - f.window + 1 > 0) i_begin = j0 - f.window + 1;
    if (f.window > 0 && last + f.window < len) i_end = last + f.window;
    const int group = f.q_heads / f.k_heads;
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
      for (std::int64_t i0 = i_begin; i0 < i_end; i0 += tile) {
        const int rows_here = static_cast<int>(len - i0 < tile ? len - i0 : tile);
        block_sync();  // the previous tile's products are done with Q, dO and P
        load_queries(b, t, start, i0, rows_here, h);
        block_sync();
        scores(b, t);
        block_sync();
        probabilities(b, t, start, i0, rows_here, j0, cols_here, h);
        block_sync();
        for_warps(b, [&](int w) {  // dV += Pᵀ·dO over this warp's 16 keys
          warp_accumulate<true>(t.dv + 16 * w * f.v_dim, f.v_dim, t.p + 16 * w, tile, t.dout, f.v_dim, f.v_dim, tile);
        });
        output_scores(b, t);
        block_sync();
        bias_grads(b, t, start, i0, rows_here, j0, cols_here, h, /*rows=*/false);
        block_sync();
        score_gradient(b, t);
        block_sync();
        for_warps(b, [&](int w) {  // dK += dSᵀ·Q
          warp_accumulate<true>(t.dk + 16 * w * f.head_dim, f.head_dim, t.p + 16 * w, tile, t.q, f.head_dim,
                                f.head_dim, tile);
        });
      }
    block_sync();
    for_threads(b, [&](int tid) {
      for (int e = tid; e < cols_here * f.head_dim; e += b.threads) {
        const int r = e / f.head_dim, c = e % f.head_dim;
        grad_k[((start + j0 + r) * f.k_heads + g) * f.head_dim + c] = storage<T>::store(f.scale * t.dk[e]);
      }
      for (int e = tid; e < cols_here * f.v_dim; e += b.threads) {
        const int r = e / f.v_dim, c = e % f.v_dim;
        grad_v[((start + j0 + r) * f.k_heads + g) * f.v_dim + c] = storage<T>::store(t.dv[e]);
      }
    });
  }

  /// A block per (query tile, sequence, query head h): dQ of the tile's queries.
  GRAPE_HOST_DEVICE void run_queries(std::int64_t query_block, std::int64_t sequence, std::int64_t h,
                                     const block_shape& b, unsigned char* smem) const {
    const tile_place at = place_tile(query_block, sequence);
    if (at.here == 0) return;
    const std::int64_t start = at.start, len = at.len, i0 = at.first;
    const int rows_here = at.here;
    const tiles t = tiles_of(smem);
    float* dq = t.dk;  // run_queries keeps dQ in dK's place
    load_queries(b, t, start, i0, rows_here, h);
    for_threads(b, [&](int tid) {
      for (int e = tid; e < tile * f.head_dim; e += b.threads) dq[e] = 0.0f;
    });
    const std::int64_t kh = h / (f.q_heads / f.k_heads), last = i0 + rows_here - 1;
    std::int64_t j_begin = 0, j_end = 0;
    f.key_range(i0, last, len, j_begin, j_end);
    for (std::int64_t j0 = j_begin; j0 < j_end; j0 += tile) {
      const int cols_here = static_cast<int>(len - j0 < tile ? len - j0 : tile);
      block_sync();  // the previous tile's products are done with K, V and dS
      f.load_keys(b, t.k, t.v, start, j0, tile, cols_here, kh, kh);
      block_sync();
      scores(b, t);
      block_sync();
      probabilities(b, t, start, i0, rows_here, j0, cols_here, h);
      block_sync();
      output_scores(b, t);
      block_sync();
      bias_grads(b, t, start, i0, rows_here, j0, cols_here, h, /*rows=*/true);
      block_sync();
      score_gradient(b, t);
      block_sync();
      for_warps(b, [&](int w) {  // dQ += dS·K over this warp's 16 queries
        warp_accumulate(dq + 16 * w * f.head_dim, f.head_dim, t.p + 16 * w * tile, tile, t.k, f.head_dim, f.head_dim,
                        tile);
      });
    }
    block_sync();
    if constexpr (walks_rows<Bias>::value) {  // each row's terms above its last key
      if (row_grads)
        for_threads(b, [&](int r) {
          if (r < rows_here) f.bias.end_grad(h, f.position(start, i0 + r), t.grad_walk[r], row_grads);
        });
    }
    for_threads(b, [&](int tid) {
      for (int e = tid; e < rows_here * f.head_dim; e += b.threads) {
        const int r = e / f.head_dim, c = e % f.head_dim;
        grad_q[((start + i0 + r) * f.q_heads + h) * f.head_dim + c] = storage<T>::store(f.scale * dq[e]);
      }
    });
  }
};

}  // namespace grape::cuda
