#pragma once
// The flash-attention loop on float32 operands already encoded (rotated or lifted, Q pre-scaled):
// tiles of queries and keys, online softmax, float32 accumulation, never a T×T buffer. A score
// bias enters through `bias(head, query_token, key_token)`, or a whole tile at once through
// `bias.add_tile(head, i0, rows, j0, cols, S, ld)` where it has one (ALiBi, T5, FoX); the mask through
// the sequence indices (causal, sliding window).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/launch.hpp"

namespace grape::cpu::detail {

/// One sequence's encoded operands, contiguous: Q [len, q_heads, qk_dim], K [len, k_heads, qk_dim]
/// (K lifted per query head has q_heads heads), V [len, k_heads, v_dim]; out [len, q_heads, v_dim]
/// in float32; lse [q_heads, lse_stride] at column `first` + query index.
struct flash_sequence {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  std::int64_t lse_stride = 0, first = 0;
  std::int64_t len = 0;
  std::int64_t q_heads = 0, k_heads = 0, v_heads = 0;
  int qk_dim = 0, v_dim = 0;
  bool causal = true;
  std::int64_t window = 0;  // > 0: key j is seen by query i only when i − j < window
};

inline constexpr std::int64_t flash_block = 64;

/// Whether query i sees key j (sequence indices): causal, sliding window.
inline bool flash_sees(const flash_sequence& s, std::int64_t i, std::int64_t j) {
  return (!s.causal || j <= i) && (s.window <= 0 || (i - j < s.window && (s.causal || j - i < s.window)));
}

/// The bias of an encoding without one: tiles that every query sees whole skip the element loop.
struct no_bias {
  float operator()(std::int64_t, std::int64_t, std::int64_t) const { return 0.0f; }
};

/// Whether every query of [i0, i1) sees every key of [j0, j1).
inline bool tile_all_seen(const flash_sequence& s, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
  if (s.causal && j1 - 1 > i0) return false;
  if (s.window <= 0) return true;
  return i1 - 1 - j0 < s.window && (s.causal || j1 - 1 - i0 < s.window);
}

/// Adds head h's bias to the tile of queries [i0, i0 + rows) × keys [j0, j0 + cols) and sets the
/// logits the mask hides to −∞: a bias with add_tile fills the tile at once; otherwise element by
/// element; neither where there is no bias and the mask hides nothing.
template <class Bias, class Tile>
void add_bias_and_mask(const flash_sequence& s, const Bias& bias, std::int64_t h, std::int64_t i0, std::int64_t j0,
                       Tile& tile) {
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  const std::int64_t rows = tile.rows(), cols = tile.cols();
  const bool all_seen = tile_all_seen(s, i0, i0 + rows, j0, j0 + cols);
  if constexpr (requires { bias.add_tile(h, i0, rows, j0, cols, tile.data(), tile.outerStride()); }) {
    bias.add_tile(h, i0, rows, j0, cols, tile.data(), tile.outerStride());
    if (!all_seen)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          if (!flash_sees(s, i0 + r, j0 + c)) tile(r, c) = minus_inf;
  } else if (!std::is_same_v<Bias, no_bias> || !all_seen) {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        tile(r, c) = flash_sees(s, i0 + r, j0 + c) ? tile(r, c) + bias(h, i0 + r, j0 + c) : minus_inf;
  }
}

/// flash_rows' loop over the key blocks, with the bias it is given.
template <class Bias>
void flash_rows_with(const flash_sequence& s, std::int64_t h, std::int64_t i0, std::int64_t i1, const Bias& bias) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using stride_map = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  const std::int64_t rows = i1 - i0;
  const std::int64_t kh = s.k_heads == s.q_heads ? h : h / (s.q_heads / s.k_heads);
  const std::int64_t vh = h / (s.q_heads / s.v_heads);
  const stride_map Q(s.q + (i0 * s.q_heads + h) * s.qk_dim, rows, s.qk_dim, Eigen::OuterStride<>(s.q_heads * s.qk_dim));
  mat acc = mat::Zero(rows, s.v_dim), S(rows, flash_block);
  Eigen::ArrayXf row_max = Eigen::ArrayXf::Constant(rows, minus_inf), row_sum = Eigen::ArrayXf::Zero(rows);
  const std::int64_t j_end = s.causal ? i1 : s.len;
  const std::int64_t j_begin = s.window > 0 ? std::max<std::int64_t>(0, i0 - s.window + 1) : 0;
  for (std::int64_t j0 = j_begin - j_begin % flash_block; j0 < j_end; j0 += flash_block) {
    const std::int64_t cols = std::min(flash_block, s.len - j0);
    const stride_map K(s.k + (j0 * s.k_heads + kh) * s.qk_dim, cols, s.qk_dim, Eigen::OuterStride<>(s.k_heads * s.qk_dim));
    const stride_map V(s.v + (j0 * s.v_heads + vh) * s.v_dim, cols, s.v_dim, Eigen::OuterStride<>(s.v_heads * s.v_dim));
    auto tile = S.leftCols(cols);
    tile.noalias() = Q * K.transpose();
    add_bias_and_mask(s, bias, h, i0, j0, tile);
    const Eigen::ArrayXf new_max = row_max.max(tile.array().rowwise().maxCoeff());
    // A row that has seen nothing yet (all −∞) shifts by 0: its exponentials are 0, not NaN.
    const Eigen::ArrayXf shift = (new_max == minus_inf).select(Eigen::ArrayXf::Zero(rows), new_max);
    tile.array() = (tile.array().colwise() - shift).exp();
    const Eigen::ArrayXf rescale = (row_max - shift).exp();
    row_sum = row_sum * rescale + tile.array().rowwise().sum();
    acc.array().colwise() *= rescale;
    row_max = new_max;
    acc.noalias() += tile * V;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = i0 + r;
    const float inv = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f;  // a row that sees nothing outputs 0
    float* o = s.out + (i * s.q_heads + h) * s.v_dim;
    for (int c = 0; c < s.v_dim; ++c) o[c] = acc(r, c) * inv;
    if (s.lse) s.lse[h * s.lse_stride + s.first + i] = row_max[r] + std::log(row_sum[r]);
  }
}

/// Rows [i0, i1) of head h: the online softmax over every key block the mask lets in. The
/// exponentials and row reductions run on whole tiles (Eigen's vectorised exp); the bias and the
/// mask through add_bias_and_mask. A bias that gives row_block(h, i0, rows) (its rows computed
/// once for the block: GRAPE-AP) adds its tiles from that.
template <class Bias>
void flash_rows(const flash_sequence& s, std::int64_t h, std::int64_t i0, std::int64_t i1, const Bias& bias) {
  if constexpr (requires { bias.row_block(h, i0, i1 - i0); }) {
    const auto block = bias.row_block(h, i0, i1 - i0);
    flash_rows_with(s, h, i0, i1, block);
  } else {
    flash_rows_with(s, h, i0, i1, bias);
  }
}

/// Queries per work item of the forward: 256 when every query sees every key (each K and V tile
/// then serves four times as many rows, which amortises the products' packing: 0.59 → 0.67 of the
/// same-run GEMM at T = 2048, H = 8, D = 128, docs/performance.md), 64 under a causal mask or a
/// window (a larger block computes more masked logits on the diagonal than it saves).
inline std::int64_t flash_query_rows(const flash_sequence& s) {
  return s.causal || s.window > 0 ? flash_block : 4 * flash_block;
}

/// Every head and query block of one sequence, through the one CPU launcher.
template <class Bias>
void flash_sequence_forward(const flash_sequence& s, const Bias& bias, int threads) {
  const std::int64_t rows = flash_query_rows(s), blocks = (s.len + rows - 1) / rows;
  launch_items(s.q_heads * blocks, 0, threads, [&](std::int64_t w, float*) {
    const std::int64_t h = w / blocks, b = w % blocks;
    flash_rows(s, h, b * rows, std::min(s.len, (b + 1) * rows), bias);
  });
}

}  // namespace grape::cpu::detail
