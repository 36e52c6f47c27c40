#pragma once
// One sequence's operands for the flash loops (forward and backward) and the mask they apply:
// causal, sliding window, per logit (flash_sees, the definition), per row (columns_seen), per key
// tile (rows_seeing), and with a bias into a score tile (add_bias_and_mask, and
// products_bias_and_mask where the products add an offset bias as they store the logits).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "grape/inject/offset_tile.hpp"

namespace grape::cpu::detail {

/// One sequence's encoded operands, contiguous: Q [len, q_heads, qk_dim], K [keys(), k_heads,
/// qk_dim] (K lifted per query head has q_heads heads), V [keys(), v_heads, v_dim]; out [len,
/// q_heads, v_dim] in float32; lse [q_heads, lse_stride] at column `first` + query index. Queries
/// and keys are the same tokens (k_len −1), or the keys have tokens of their own (a query chunk
/// against another part of the sequence, new queries against a cache): then key j meets the mask
/// as the query index j − key_shift.
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
  bool bf16_products = false;  // the products on bf16 tiles (matmul_path::avx512_bf16), else float32
  std::int64_t k_len = -1;     // keys: −1, the queries' tokens; else a count of their own
  std::int64_t key_shift = 0;  // key j is masked as query index j − key_shift

  std::int64_t keys() const { return k_len < 0 ? len : k_len; }
};

/// Queries and keys per tile of the backward.
inline constexpr std::int64_t flash_block = 64;

/// Whether query i sees key j (sequence indices): causal, sliding window.
inline bool flash_sees(const flash_sequence& s, std::int64_t i, std::int64_t j) {
  j -= s.key_shift;
  return (!s.causal || j <= i) && (s.window <= 0 || (i - j < s.window && (s.causal || j - i < s.window)));
}

/// The bias of an encoding without one: tiles that every query sees whole skip the element loop.
struct no_bias {
  float operator()(std::int64_t, std::int64_t, std::int64_t) const { return 0.0f; }
};

/// Whether every query of [i0, i1) sees every key of [j0, j1).
inline bool tile_all_seen(const flash_sequence& s, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
  j0 -= s.key_shift, j1 -= s.key_shift;
  if (s.causal && j1 - 1 > i0) return false;
  if (s.window <= 0) return true;
  return i1 - 1 - j0 < s.window && (s.causal || j1 - 1 - i0 < s.window);
}

/// The keys [j0, j0 + cols) that query i sees, as columns [first, last) of its tile row: one
/// contiguous range, since the causal and window limits bound j from above and below.
inline std::pair<std::int64_t, std::int64_t> columns_seen(const flash_sequence& s, std::int64_t i, std::int64_t j0,
                                                          std::int64_t cols) {
  std::int64_t lo = j0, hi = j0 + cols;  // keys
  const std::int64_t at = i + s.key_shift;  // the query's place among the keys
  if (s.causal) hi = std::min(hi, at + 1);
  if (s.window > 0) {
    lo = std::max(lo, at - s.window + 1);
    if (!s.causal) hi = std::min(hi, at + s.window);
  }
  lo = std::min(lo, j0 + cols);
  return {lo - j0, std::max(lo, hi) - j0};
}

/// Adds head h's bias to the tile of queries [i0, i0 + rows) × keys [j0, j0 + cols) and sets the
/// logits the mask hides to −∞: a bias with add_tile fills the tile at once; otherwise element by
/// element; neither where there is no bias and the mask hides nothing. The mask is written per row
/// as the two runs of columns outside columns_seen (no test per logit).
template <class Bias, class Tile>
void add_bias_and_mask(const flash_sequence& s, const Bias& bias, std::int64_t h, std::int64_t i0, std::int64_t j0,
                       Tile& tile) {
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  const std::int64_t rows = tile.rows(), cols = tile.cols();
  const bool all_seen = tile_all_seen(s, i0, i0 + rows, j0, j0 + cols);
  constexpr bool tile_bias = requires { bias.add_tile(h, i0, rows, j0, cols, tile.data(), tile.outerStride()); };
  if constexpr (tile_bias) bias.add_tile(h, i0, rows, j0, cols, tile.data(), tile.outerStride());
  if (all_seen && (tile_bias || std::is_same_v<Bias, no_bias>)) return;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto [first, last] = all_seen ? std::pair<std::int64_t, std::int64_t>{0, cols} : columns_seen(s, i0 + r, j0, cols);
    float* row = &tile(r, 0);
    std::fill(row, row + first, minus_inf);
    if constexpr (!tile_bias && !std::is_same_v<Bias, no_bias>)
      for (std::int64_t c = first; c < last; ++c) row[c] += bias(h, i0 + r, j0 + c);
    std::fill(row + last, row + cols, minus_inf);
  }
}

/// The tile's logits from `products(toeplitz)`, then its bias and mask. Where the bias is a
/// function of the offset with a Toeplitz tile here (OffsetTileBias on consecutive positions), its
/// distinct values go into `values` (rows + cols − 1 floats) and the products add toeplitz[c − r]
/// to logit (r, c) as they store it (the bf16 tiles in registers, bf16::multiply; the float32 ones
/// after their product, add_toeplitz_tile); otherwise toeplitz is null and add_bias_and_mask adds
/// the bias. The logits are the same floats either way (product, then + bias).
template <class Bias, class Tile, class Products>
void products_bias_and_mask(const flash_sequence& s, const Bias& bias, std::int64_t h, std::int64_t i0,
                            std::int64_t j0, Tile& tile, float* values, const Products& products) {
  const std::int64_t rows = tile.rows(), cols = tile.cols();
  if constexpr (requires { bias.offset_values(h, i0, rows, j0, cols, values); }) {
    if (bias.offset_values(h, i0, rows, j0, cols, values)) {
      products(values + (rows - 1));  // row 0's offsets start at values[rows − 1]
      add_bias_and_mask(s, no_bias{}, h, i0, j0, tile);  // the mask only
      return;
    }
  }
  products(static_cast<const float*>(nullptr));
  add_bias_and_mask(s, bias, h, i0, j0, tile);
}

/// The rows of the query block [i0, i1) that see some key of [j0, j1) under the mask: a
/// contiguous range, since the causal and window limits are monotone in the query index.
struct row_range {
  std::int64_t first, last;  // query indices, [first, last)
};
inline row_range rows_seeing(const flash_sequence& s, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                             std::int64_t j1) {
  std::int64_t first = i0, last = i1;
  j0 -= s.key_shift, j1 -= s.key_shift;
  if (s.causal) first = std::max(first, j0);
  if (s.window > 0) {
    last = std::min(last, j1 - 1 + s.window);
    if (!s.causal) first = std::max(first, j0 - s.window + 1);
  }
  return {first, std::max(first, last)};
}

}  // namespace grape::cpu::detail
