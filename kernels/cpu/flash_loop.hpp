#pragma once
// The flash-attention forward on float32 operands already encoded (rotated or lifted, Q
// pre-scaled): blocks of 256 queries against tiles of 128 keys, online softmax, float32
// accumulation, never a T×T buffer. The two products per tile run in float32 or, for bf16
// storage on a CPU with AVX512-BF16, on bf16 tiles (flash_products.hpp, matmul_path.hpp). A score bias enters through `bias(head, query_token,
// key_token)`, a whole tile at once through `bias.add_tile(head, i0, rows, j0, cols, S, ld)`
// where it has one (FoX), or as it is stored by the products where it is a function of the offset
// (ALiBi, T5: products_bias_and_mask); the mask through the sequence indices (flash_mask.hpp).
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/flash_mask.hpp"
#include "cpu/flash_products.hpp"
#include "cpu/launch.hpp"
#include "cpu/online_softmax.hpp"
#include "cpu/packed_gemm.hpp"

namespace grape::cpu::detail {

/// flash_rows' loop over the key tiles, with the bias it is given. Each key tile is multiplied
/// with only the rows that see part of it, so a large query block under a causal mask or a
/// window computes few more hidden logits than a 64-row one.
template <class Products, class Bias>
void flash_rows_with(const flash_sequence& s, const Products& products, std::int64_t h, std::int64_t i0,
                     std::int64_t i1, const Bias& bias, float* scratch) {
  using mat = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  const std::int64_t rows = i1 - i0, ld = flash_key_tile;
  const std::int64_t kh = s.k_heads == s.q_heads ? h : h / (s.q_heads / s.k_heads);
  const std::int64_t vh = h / (s.q_heads / s.v_heads);
  // The thread's scratch (flash_sequence_forward sizes it), reused across its work items; each
  // part starts on a cache line (unaligned score rows slow the forward: docs/performance.md,
  // appendix "Fused attention").
  float* const parts = align_to_line(scratch);
  mat acc(parts, rows, s.v_dim), S(parts + line_floats(rows * s.v_dim), rows, ld);
  acc.setZero();
  const auto block = products.start(s, h, i0, rows, S.data() + line_floats(rows * ld));
  Eigen::ArrayXf row_max = Eigen::ArrayXf::Constant(rows, minus_inf), row_sum = Eigen::ArrayXf::Zero(rows);
  std::array<float, flash_query_block + flash_key_tile> offset_values;  // a Toeplitz bias tile's values
  // The keys the mask can let in (key j meets it as query index j − key_shift).
  const std::int64_t keys = s.keys(), j_end = s.causal ? std::min(keys, i1 + s.key_shift) : keys;
  const std::int64_t j_begin = s.window > 0 ? std::max<std::int64_t>(0, i0 + s.key_shift - s.window + 1) : 0;
  for (std::int64_t j0 = j_begin - j_begin % flash_key_tile; j0 < j_end; j0 += flash_key_tile) {
    const std::int64_t cols = std::min(flash_key_tile, keys - j0), t = j0 / flash_key_tile;
    const auto [first, last] = rows_seeing(s, i0, i1, j0, j0 + cols);
    if (first == last) continue;
    const std::int64_t r0 = first - i0, n = last - first;
    auto tile = S.block(r0, 0, n, cols);
    products_bias_and_mask(s, bias, h, first, j0, tile, offset_values.data(), [&](const float* toeplitz) {
      block.scores(S.data(), ld, r0, n, kh, t, cols, toeplitz);
    });
    // Row by row, each row contiguous: Eigen vectorises exp on a row, not on the tile minus a
    // broadcast column (that form calls the scalar expf per logit: docs/performance.md, appendix
    // "Fused attention").
    for (std::int64_t r = r0; r < r0 + n; ++r)
      online_softmax_step(S.row(r).head(cols).array(), row_max[r], row_sum[r], acc.row(r));
    block.add_values(acc.data(), S.data(), ld, r0, n, vh, t, cols);
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
template <class Products, class Bias>
void flash_rows(const flash_sequence& s, const Products& products, std::int64_t h, std::int64_t i0,
                std::int64_t i1, const Bias& bias, float* scratch) {
  if constexpr (requires { bias.row_block(h, i0, i1 - i0); }) {
    const auto rows = bias.row_block(h, i0, i1 - i0);
    flash_rows_with(s, products, h, i0, i1, rows, scratch);
  } else {
    flash_rows_with(s, products, h, i0, i1, bias, scratch);
  }
}

/// Every head and query block of one sequence with the given products (flash_products.hpp),
/// through the one CPU launcher.
template <class Products, class Bias>
void flash_sequence_forward_with(const flash_sequence& s, const Bias& bias, int threads) {
  const std::int64_t rows = flash_query_block, blocks = (s.len + rows - 1) / rows;
  const Products products(s, threads);
  // Per thread: the accumulator [rows, v_dim], the scores [rows, key tile] and the products'
  // packed query block and probabilities of one work item.
  const std::int64_t scratch = line_floats(rows * s.v_dim) + line_floats(rows * flash_key_tile) +
                               Products::scratch_floats(s, rows) + cache_line_floats;
  launch_items(s.q_heads * blocks, static_cast<int>(scratch), threads, [&](std::int64_t w, float* thread_scratch) {
    const std::int64_t h = w / blocks, b = w % blocks;
    flash_rows(s, products, h, b * rows, std::min(s.len, (b + 1) * rows), bias, thread_scratch);
  });
}

/// The forward of one sequence on the products s.products names.
template <class Bias>
void flash_sequence_forward(const flash_sequence& s, const Bias& bias, int threads) {
  if (s.bf16_products)
    flash_sequence_forward_with<bf16_tile_products>(s, bias, threads);
  else
    flash_sequence_forward_with<f32_tile_products>(s, bias, threads);
}

}  // namespace grape::cpu::detail
