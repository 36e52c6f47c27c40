#pragma once
// The forward's two products per (query block, key tile), S = Q·Kᵀ and O += P·V, in two forms
// with one interface, so that the flash loop (flash_loop.hpp) does not depend on which runs:
// - f32_tile_products: float32 operands on Eigen's GEMM kernel (packed_gemm.hpp);
// - bf16_tile_products: the encoded Q and K and the probabilities P rounded to bf16 and
//   multiplied with AVX512-BF16 dot products into float32 (bf16_tiles.hpp), as flash-attention
//   rounds P; chosen by matmul_path_for (matmul_path.hpp) for bf16 storage.
// Each packs every K and V tile of a sequence once (its constructor) and a work item's query block
// once (start); a work item's scratch holds the packed query block and the packed probabilities.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>

#include "cpu/bf16_tiles.hpp"
#include "cpu/flash_mask.hpp"
#include "cpu/launch.hpp"
#include "cpu/packed_gemm.hpp"

namespace grape::cpu::detail {

/// Queries per work item and keys per tile of the forward. 256 queries: each K and V tile serves
/// four times as many rows as with 64; under a mask each tile meets only the rows that see it.
/// 128 keys: the per-tile work outside the products halves against 64. What each gains:
/// docs/performance.md, appendix "Fused attention".
inline constexpr std::int64_t flash_query_block = 256, flash_key_tile = 128;

/// Calls pack(head, tile, is_k) for every K and V tile of a sequence, on the call's threads.
template <class Pack>
void for_each_key_tile(const flash_sequence& s, int threads, const Pack& pack) {
  const std::int64_t tiles = (s.keys() + flash_key_tile - 1) / flash_key_tile, k_items = s.k_heads * tiles;
  launch_items(k_items + s.v_heads * tiles, 0, threads, [&](std::int64_t w, float*) {
    const bool is_k = w < k_items;
    const std::int64_t item = is_k ? w : w - k_items;
    pack(item / tiles, item % tiles, is_k);
  });
}

/// Eigen's GEMM kernel on float32 tiles: K tile t of head kh packed as the lhs [keys × qk_dim] of
/// Sᵀ = K·Qᵀ, V tile t of head vh as the lhs [v_dim × keys] of Oᵀ += Vᵀ·Pᵀ.
struct f32_tile_products {
  packed::blocks k, v;

  f32_tile_products(const flash_sequence& s, int threads) {
    const std::int64_t tiles = (s.keys() + flash_key_tile - 1) / flash_key_tile;
    k.shape(s.k_heads, tiles, packed::lhs_floats(flash_key_tile, s.qk_dim));
    v.shape(s.v_heads, tiles, packed::lhs_floats(flash_key_tile, s.v_dim));
    for_each_key_tile(s, threads, [&](std::int64_t head, std::int64_t t, bool is_k) {
      const std::int64_t j0 = t * flash_key_tile, keys = std::min(flash_key_tile, s.keys() - j0);
      if (is_k)
        packed::pack_lhs<Eigen::RowMajor>(k.at(head, t), s.k + (j0 * s.k_heads + head) * s.qk_dim,
                                          s.k_heads * s.qk_dim, keys, s.qk_dim);
      else
        packed::pack_lhs<Eigen::ColMajor>(v.at(head, t), s.v + (j0 * s.v_heads + head) * s.v_dim,
                                          s.v_heads * s.v_dim, s.v_dim, keys);
    });
  }

  static std::int64_t scratch_floats(const flash_sequence& s, std::int64_t rows) {
    return line_floats(rows * s.qk_dim) + line_floats(rows * flash_key_tile);
  }

  /// One work item's products: query rows [i0, i0 + rows) of head h.
  struct block {
    const f32_tile_products& p;
    const flash_sequence& s;
    std::int64_t rows;
    float *queries, *probabilities;

    /// S rows [r0, r0 + n) = Q·Kᵀ against key tile t (cols keys) of KV head kh, S row-major (ld
    /// apart); with `toeplitz`, logit (r, c) of those rows then gets toeplitz[c − r] added (an
    /// offset bias: products_bias_and_mask). Computed from whole panels of the packed queries:
    /// the rows around [r0, r0 + n) up to the panels' edges are written too, and left unread.
    void scores(float* S, std::int64_t ld, std::int64_t r0, std::int64_t n, std::int64_t kh, std::int64_t t,
                std::int64_t cols, const float* toeplitz) const {
      constexpr std::int64_t panel = packed::rhs_panel;
      const std::int64_t p0 = r0 - r0 % panel, p1 = std::min(rows, (r0 + n + panel - 1) / panel * panel);
      std::fill(S + p0 * ld, S + p1 * ld, 0.0f);
      // As the column-major Sᵀ = K·Qᵀ.
      packed::multiply_add(S + p0 * ld, ld, p.k.at(kh, t), queries + p0 * s.qk_dim, cols, s.qk_dim, p1 - p0);
      if (toeplitz) add_toeplitz_tile(S + r0 * ld, ld, n, cols, toeplitz);
    }
    /// acc rows [r0, r0 + n) (v_dim apart) += P·V, P the rows [r0, r0 + n) of S (cols keys).
    void add_values(float* acc, const float* S, std::int64_t ld, std::int64_t r0, std::int64_t n, std::int64_t vh,
                    std::int64_t t, std::int64_t cols) const {
      // As the column-major Oᵀ += Vᵀ·Pᵀ.
      packed::pack_rhs(probabilities, S + r0 * ld, ld, cols, n);
      packed::multiply_add(acc + r0 * s.v_dim, s.v_dim, p.v.at(vh, t), probabilities, s.v_dim, cols, n);
    }
  };

  /// Packs query rows [i0, i0 + rows) of head h into the scratch (scratch_floats floats, on a line).
  block start(const flash_sequence& s, std::int64_t h, std::int64_t i0, std::int64_t rows, float* scratch) const {
    block b{*this, s, rows, scratch, scratch + line_floats(rows * s.qk_dim)};
    packed::pack_rhs(b.queries, s.q + (i0 * s.q_heads + h) * s.qk_dim, s.q_heads * s.qk_dim, s.qk_dim, rows);
    return b;
  }
};

/// AVX512-BF16 dot products on bf16 tiles: K tile t of head kh packed as B = Kᵀ [qk_dim × keys],
/// V tile t of head vh as B = V [keys × v_dim]; the query block and each tile's P rounded to bf16
/// rows. Float32 sums, so S, the softmax and O stay float32.
struct bf16_tile_products {
  bf16::buffer k, v;
  std::int64_t tiles = 0, k_block = 0, v_block = 0;

  bf16_tile_products(const flash_sequence& s, int threads)
      : tiles((s.keys() + flash_key_tile - 1) / flash_key_tile),
        k_block(bf16::packed_elements(s.qk_dim, flash_key_tile)),
        v_block(bf16::packed_elements(flash_key_tile, s.v_dim)) {
    k.resize(static_cast<std::size_t>(s.k_heads * tiles * k_block));
    v.resize(static_cast<std::size_t>(s.v_heads * tiles * v_block));
    for_each_key_tile(s, threads, [&](std::int64_t head, std::int64_t t, bool is_k) {
      const std::int64_t j0 = t * flash_key_tile, keys = std::min(flash_key_tile, s.keys() - j0);
      if (is_k)  // B = Kᵀ: element (channel c, key n) at K[n][c]
        bf16::pack_b(k_at(head, t), s.k + (j0 * s.k_heads + head) * s.qk_dim, 1, s.k_heads * s.qk_dim, s.qk_dim, keys);
      else  // B = V: element (key k, channel n) at V[k][n]
        bf16::pack_b(v_at(head, t), s.v + (j0 * s.v_heads + head) * s.v_dim, s.v_heads * s.v_dim, 1, keys, s.v_dim);
    });
  }
  bf16::element* k_at(std::int64_t head, std::int64_t t) { return k.data() + (head * tiles + t) * k_block; }
  bf16::element* v_at(std::int64_t head, std::int64_t t) { return v.data() + (head * tiles + t) * v_block; }
  const bf16::element* k_at(std::int64_t head, std::int64_t t) const { return k.data() + (head * tiles + t) * k_block; }
  const bf16::element* v_at(std::int64_t head, std::int64_t t) const { return v.data() + (head * tiles + t) * v_block; }

  /// bf16 elements as floats of scratch (two per float), on whole lines.
  static std::int64_t floats_of(std::int64_t elements) { return line_floats((elements + 1) / 2); }
  static std::int64_t scratch_floats(const flash_sequence& s, std::int64_t rows) {
    return floats_of(rows * bf16::row_elements(s.qk_dim)) + floats_of(rows * bf16::row_elements(flash_key_tile));
  }

  struct block {
    const bf16_tile_products& p;
    const flash_sequence& s;
    bf16::element *queries, *probabilities;

    /// As f32_tile_products' scores, toeplitz added as the products store the logits
    /// (bf16::multiply): an offset bias without a pass of its own over S.
    void scores(float* S, std::int64_t ld, std::int64_t r0, std::int64_t n, std::int64_t kh, std::int64_t t,
                std::int64_t cols, const float* toeplitz) const {
      const std::int64_t lq = bf16::row_elements(s.qk_dim);
      bf16::multiply(S + r0 * ld, ld, queries + r0 * lq, lq, p.k_at(kh, t), n, cols, s.qk_dim, false, toeplitz);
    }
    void add_values(float* acc, const float* S, std::int64_t ld, std::int64_t r0, std::int64_t n, std::int64_t vh,
                    std::int64_t t, std::int64_t cols) const {
      const std::int64_t lp = bf16::row_elements(cols);
      bf16::round_rows(probabilities, lp, S + r0 * ld, ld, n, cols);
      bf16::multiply(acc + r0 * s.v_dim, s.v_dim, probabilities, lp, p.v_at(vh, t), n, s.v_dim, cols, true);
    }
  };

  block start(const flash_sequence& s, std::int64_t h, std::int64_t i0, std::int64_t rows, float* scratch) const {
    auto* queries = reinterpret_cast<bf16::element*>(scratch);
    auto* probabilities = reinterpret_cast<bf16::element*>(scratch + floats_of(rows * bf16::row_elements(s.qk_dim)));
    bf16::round_rows(queries, bf16::row_elements(s.qk_dim), s.q + (i0 * s.q_heads + h) * s.qk_dim,
                     s.q_heads * s.qk_dim, rows, s.qk_dim);
    return {*this, s, queries, probabilities};
  }
};

}  // namespace grape::cpu::detail
