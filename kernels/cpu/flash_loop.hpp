#pragma once
// The flash-attention forward on float32 operands already encoded (rotated or lifted, Q
// pre-scaled): blocks of 256 queries against tiles of 128 keys, online softmax, float32
// accumulation, never a T×T buffer. A score bias enters through `bias(head, query_token,
// key_token)`, or a whole tile at once through `bias.add_tile(head, i0, rows, j0, cols, S, ld)`
// where it has one (ALiBi, T5, FoX); the mask through the sequence indices (flash_mask.hpp).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/flash_mask.hpp"
#include "cpu/launch.hpp"
#include "cpu/online_softmax.hpp"
#include "cpu/packed_gemm.hpp"

namespace grape::cpu::detail {

/// Queries per work item and keys per tile of the forward. 256 queries: each K and V tile serves
/// four times as many rows as with 64 (0.59 → 0.67 of the same-run GEMM at T = 2048, H = 8,
/// D = 128 without a mask, docs/performance.md); under a mask each tile meets only the rows that
/// see it. 128 keys: the per-tile work outside the products halves against 64 (+2–4 %).
inline constexpr std::int64_t flash_query_block = 256, flash_key_tile = 128;

/// Every K and V tile of a sequence packed once for the products (packed_gemm.hpp): K tile t of
/// head kh as the lhs [keys × qk_dim] of Sᵀ = K·Qᵀ, V tile t of head vh as the lhs [v_dim × keys]
/// of Oᵀ += Vᵀ·Pᵀ.
struct packed_key_tiles {
  packed::blocks k, v;
};

inline packed_key_tiles pack_key_tiles(const flash_sequence& s, int threads) {
  packed_key_tiles p;
  const std::int64_t tiles = (s.len + flash_key_tile - 1) / flash_key_tile;
  p.k.shape(s.k_heads, tiles, packed::lhs_floats(flash_key_tile, s.qk_dim));
  p.v.shape(s.v_heads, tiles, packed::lhs_floats(flash_key_tile, s.v_dim));
  const std::int64_t k_items = s.k_heads * tiles;
  launch_items(k_items + s.v_heads * tiles, 0, threads, [&](std::int64_t w, float*) {
    const bool is_k = w < k_items;
    const std::int64_t head = (is_k ? w : w - k_items) / tiles, t = (is_k ? w : w - k_items) % tiles;
    const std::int64_t j0 = t * flash_key_tile, keys = std::min(flash_key_tile, s.len - j0);
    if (is_k)
      packed::pack_lhs<Eigen::RowMajor>(p.k.at(head, t), s.k + (j0 * s.k_heads + head) * s.qk_dim,
                                        s.k_heads * s.qk_dim, keys, s.qk_dim);
    else
      packed::pack_lhs<Eigen::ColMajor>(p.v.at(head, t), s.v + (j0 * s.v_heads + head) * s.v_dim,
                                        s.v_heads * s.v_dim, s.v_dim, keys);
  });
  return p;
}

/// flash_rows' loop over the key tiles, with the bias it is given. Each key tile is multiplied
/// with only the rows that see part of it (rounded out to the packed query block's panels: the
/// extra rows' logits are computed and left unread), so a large query block under a causal mask
/// or a window computes few more hidden logits than a 64-row one.
template <class Bias>
void flash_rows_with(const flash_sequence& s, const packed_key_tiles& tiles, std::int64_t h, std::int64_t i0,
                     std::int64_t i1, const Bias& bias, float* scratch) {
  using mat = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  constexpr std::int64_t panel = packed::rhs_panel;
  const std::int64_t rows = i1 - i0, ld = flash_key_tile;
  const std::int64_t kh = s.k_heads == s.q_heads ? h : h / (s.q_heads / s.k_heads);
  const std::int64_t vh = h / (s.q_heads / s.v_heads);
  // The thread's scratch (flash_sequence_forward sizes it), reused across its work items; each
  // part starts on a cache line (unaligned score rows cost 5 % of the forward).
  float* const parts = align_to_line(scratch);
  mat acc(parts, rows, s.v_dim), S(parts + line_floats(rows * s.v_dim), rows, ld);
  float* queries = S.data() + line_floats(rows * ld);
  float* probabilities = queries + line_floats(rows * s.qk_dim);
  acc.setZero();
  packed::pack_rhs(queries, s.q + (i0 * s.q_heads + h) * s.qk_dim, s.q_heads * s.qk_dim, s.qk_dim, rows);
  Eigen::ArrayXf row_max = Eigen::ArrayXf::Constant(rows, minus_inf), row_sum = Eigen::ArrayXf::Zero(rows);
  const std::int64_t j_end = s.causal ? i1 : s.len;
  const std::int64_t j_begin = s.window > 0 ? std::max<std::int64_t>(0, i0 - s.window + 1) : 0;
  for (std::int64_t j0 = j_begin - j_begin % flash_key_tile; j0 < j_end; j0 += flash_key_tile) {
    const std::int64_t cols = std::min(flash_key_tile, s.len - j0), t = j0 / flash_key_tile;
    const auto [first, last] = rows_seeing(s, i0, i1, j0, j0 + cols);
    if (first == last) continue;
    const std::int64_t r0 = first - i0, n = last - first;
    // S rows [p0, p1) = Q·Kᵀ, as the column-major Sᵀ = K·Qᵀ, from whole panels of packed queries.
    const std::int64_t p0 = r0 - r0 % panel, p1 = std::min(rows, (r0 + n + panel - 1) / panel * panel);
    S.middleRows(p0, p1 - p0).setZero();
    packed::multiply_add(S.data() + p0 * ld, ld, tiles.k.at(kh, t), queries + p0 * s.qk_dim, cols,
                         s.qk_dim, p1 - p0);
    auto tile = S.block(r0, 0, n, cols);
    add_bias_and_mask(s, bias, h, first, j0, tile);
    // Row by row, each row contiguous: Eigen vectorises exp on a row, not on the tile minus a
    // broadcast column (that form called the scalar expf per logit: 19 % of the forward's time).
    for (std::int64_t r = r0; r < r0 + n; ++r)
      online_softmax_step(S.row(r).head(cols).array(), row_max[r], row_sum[r], acc.row(r));
    // O rows [r0, r0 + n) += P·V, as the column-major Oᵀ += Vᵀ·Pᵀ.
    packed::pack_rhs(probabilities, S.data() + r0 * ld, ld, cols, n);
    packed::multiply_add(acc.data() + r0 * s.v_dim, s.v_dim, tiles.v.at(vh, t), probabilities, s.v_dim, cols, n);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = i0 + r;
    const float inv = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f;  // a row that sees nothing outputs 0
    float* o = s.out + (i * s.q_heads + h) * s.v_dim;
    for (int c = 0; c < s.v_dim; ++c) o[c] = acc(r, c) * inv;
    if (s.lse) s.lse[h * s.lse_stride + s.first + i] = row_max[r] + std::log(row_sum[r]);
  }
}

/// Rows [i0, i1) of head h: the online softmax over every key tile the mask lets in. The
/// exponentials and row reductions run row by row (Eigen's vectorised exp); the bias and the
/// mask through add_bias_and_mask. A bias that gives row_block(h, i0, rows) (its rows computed
/// once for the block: GRAPE-AP) adds its tiles from that.
template <class Bias>
void flash_rows(const flash_sequence& s, const packed_key_tiles& tiles, std::int64_t h, std::int64_t i0,
                std::int64_t i1, const Bias& bias, float* scratch) {
  if constexpr (requires { bias.row_block(h, i0, i1 - i0); }) {
    const auto block = bias.row_block(h, i0, i1 - i0);
    flash_rows_with(s, tiles, h, i0, i1, block, scratch);
  } else {
    flash_rows_with(s, tiles, h, i0, i1, bias, scratch);
  }
}


/// Every head and query block of one sequence, through the one CPU launcher.
template <class Bias>
void flash_sequence_forward(const flash_sequence& s, const Bias& bias, int threads) {
  const std::int64_t rows = flash_query_block, blocks = (s.len + rows - 1) / rows;
  const packed_key_tiles tiles = pack_key_tiles(s, threads);
  // Per thread: the accumulator [rows, v_dim], the scores [rows, key tile], the packed queries and
  // the packed probabilities of one work item.
  const std::int64_t scratch = line_floats(rows * s.v_dim) + 2 * line_floats(rows * flash_key_tile) +
                               line_floats(rows * s.qk_dim) + cache_line_floats;
  launch_items(s.q_heads * blocks, static_cast<int>(scratch), threads, [&](std::int64_t w, float* thread_scratch) {
    const std::int64_t h = w / blocks, b = w % blocks;
    flash_rows(s, tiles, h, b * rows, std::min(s.len, (b + 1) * rows), bias, thread_scratch);
  });
}

}  // namespace grape::cpu::detail
