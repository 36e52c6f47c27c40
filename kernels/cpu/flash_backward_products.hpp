#pragma once
// The backward's five products per (query block, key block) tile, in two forms with one
// interface, so that the flash backward (flash_backward.hpp) does not depend on which runs:
//   logits:  S = Q'·K'ᵀ and dP = dO·Vᵀ of the tile;
//   add_dq:  dQ' += dS·K';
//   key_gradients: dV += Pᵀ·dO and dK' += dSᵀ·Q' over the query blocks that see a key block.
// - f32_backward_products: float32 on Eigen's GEMM kernel, every operand packed once per sequence
//   in the orientation its product takes (flash_backward_operands.hpp);
// - bf16_backward_products: Q', K', V, dO, P and dS rounded to bf16 and multiplied with AVX512-BF16
//   dot products into float32 sums (bf16_tiles.hpp); dVᵀ and dK'ᵀ of a key block are summed in the
//   thread's scratch (their A operands dOᵀ and Q'ᵀ are rows there) and added to dV and dK' once
//   per (head, key block). Chosen by matmul_path_for for bf16 storage, as the forward.
#include <algorithm>
#include <cstdint>

#include "cpu/bf16_tiles.hpp"
#include "cpu/flash_backward_operands.hpp"
#include "cpu/flash_mask.hpp"
#include "cpu/launch.hpp"
#include "cpu/packed_gemm.hpp"

namespace grape::cpu::detail {

/// A thread's tiles of the backward: P and dS [64, 64] (row-major, ld floats apart) and the
/// products' own work space, each on its own cache lines.
struct backward_tiles {
  static constexpr std::int64_t ld = flash_block, floats = flash_block * flash_block;
  float *p, *ds, *work;
  explicit backward_tiles(float* scratch) : p(align_to_line(scratch)), ds(p + floats), work(ds + floats) {}
  /// Scratch floats for tiles whose products need `work_floats` of work space.
  static std::int64_t scratch_floats(std::int64_t work_floats) { return 2 * floats + work_floats + cache_line_floats; }
};

struct f32_backward_products {
  flash_backward_operands ops;
  const flash_sequence& s;

  f32_backward_products(const flash_sequence& seq, const flash_gradients& g, int threads)
      : ops(pack_backward_operands(seq, g, threads)), s(seq) {}
  std::int64_t work_floats() const { return backward_tiles::floats; }  // one packed rhs of a tile

  /// t.p = S and t.ds = dP of queries [i0, i0 + rows) of head h against key block jb (cols keys);
  /// with `toeplitz`, S's logit (r, c) then gets toeplitz[c − r] (products_bias_and_mask).
  void logits(const backward_tiles& t, std::int64_t h, std::int64_t kh, std::int64_t vh, std::int64_t i0,
              std::int64_t rows, std::int64_t jb, std::int64_t cols, const float* toeplitz) const {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::fill_n(t.p + r * t.ld, cols, 0.0f);
      std::fill_n(t.ds + r * t.ld, cols, 0.0f);
    }
    packed::multiply_add(t.p, t.ld, ops.k_rows.at(kh, jb), ops.queries(h, i0, s.qk_dim), cols, s.qk_dim, rows);
    packed::multiply_add(t.ds, t.ld, ops.v_rows.at(vh, jb), ops.grad_outs(h, i0, s.v_dim), cols, s.v_dim, rows);
    if (toeplitz) add_toeplitz_tile(t.p, t.ld, rows, cols, toeplitz);
  }

  /// dQ' of queries [i0, i0 + queries) of head h (grad_q laid out as Q) += dS·K' of key block jb.
  void add_dq(const backward_tiles& t, float* grad_q, std::int64_t h, std::int64_t kh, std::int64_t i0,
              std::int64_t jb, std::int64_t queries, std::int64_t keys) const {
    packed::pack_rhs(t.work, t.ds, t.ld, keys, queries);  // dSᵀ [keys × queries]
    packed::multiply_add(grad_q + (i0 * s.q_heads + h) * s.qk_dim, s.q_heads * s.qk_dim, ops.k_cols.at(kh, jb), t.work,
                         s.qk_dim, keys, queries);
  }

  /// dV and dK' rows of key block [j0, j0 + keys) of KV heads (kh, vh), summed over head h's
  /// query blocks (add) straight into the gradients.
  struct key_gradients {
    const f32_backward_products& p;
    const backward_tiles& t;
    float *dK, *dV;
    std::int64_t keys;
    void add(std::int64_t h, std::int64_t ib, std::int64_t queries) const {
      const flash_sequence& s = p.s;
      packed::pack_rhs<Eigen::RowMajor>(t.work, t.p, t.ld, queries, keys);  // P [queries × keys]
      packed::multiply_add(dV, s.v_heads * s.v_dim, p.ops.o_cols.at(h, ib), t.work, s.v_dim, queries, keys);
      packed::pack_rhs<Eigen::RowMajor>(t.work, t.ds, t.ld, queries, keys);  // dS [queries × keys]
      packed::multiply_add(dK, s.k_heads * s.qk_dim, p.ops.q_cols.at(h, ib), t.work, s.qk_dim, queries, keys);
    }
    void finish() const {}
  };
  key_gradients key_block(const backward_tiles& t, const flash_gradients& g, std::int64_t kh, std::int64_t vh,
                          std::int64_t j0, std::int64_t keys) const {
    return {*this, t, g.grad_k + (j0 * s.k_heads + kh) * s.qk_dim, g.grad_v + (j0 * s.v_heads + vh) * s.v_dim, keys};
  }
};

struct bf16_backward_products {
  const flash_sequence& s;
  std::int64_t blocks, query_blocks, lq, lo;  // 64-key and 64-query blocks; bf16 row lengths of Q' and dO
  bf16::buffer q_rows, o_rows;   // A of S and dP: per head [len × lq], [len × lo]
  bf16::buffer q_cols, o_cols;   // A of dK'ᵀ and dVᵀ: per (head, query block) [qk_dim × 64], [v_dim × 64]
                                 // (per block, not per sequence: rows a sequence apart would all
                                 // fall in the same cache sets)
  bf16::buffer k_t, v_t, k_b;       // B of S (K'ᵀ), of dP (Vᵀ) and of dQ' (K'), per (KV head, key block)
  std::int64_t kt_block, vt_block, kb_block;

  bf16_backward_products(const flash_sequence& seq, const flash_gradients& g, int threads)
      : s(seq), blocks((seq.keys() + flash_block - 1) / flash_block),
        query_blocks((seq.len + flash_block - 1) / flash_block), lq(bf16::row_elements(seq.qk_dim)),
        lo(bf16::row_elements(seq.v_dim)),
        kt_block(bf16::packed_elements(seq.qk_dim, flash_block)),
        vt_block(bf16::packed_elements(seq.v_dim, flash_block)),
        kb_block(bf16::packed_elements(flash_block, seq.qk_dim)) {
    const auto size = [](bf16::buffer& b, std::int64_t n) { b.resize(static_cast<std::size_t>(n)); };
    size(q_rows, s.q_heads * s.len * lq);
    size(o_rows, s.q_heads * s.len * lo);
    size(q_cols, s.q_heads * query_blocks * s.qk_dim * flash_block);
    size(o_cols, s.q_heads * query_blocks * s.v_dim * flash_block);
    size(k_t, s.k_heads * blocks * kt_block);
    size(k_b, s.k_heads * blocks * kb_block);
    size(v_t, s.v_heads * blocks * vt_block);
    const std::int64_t ldq = s.q_heads * s.qk_dim, ldo = s.q_heads * s.v_dim;
    const std::int64_t ldk = s.k_heads * s.qk_dim, ldv = s.v_heads * s.v_dim;
    // Items: per (query head, block) its four operands, then per (KV head, key block) its three.
    const std::int64_t query_items = s.q_heads * query_blocks, key_items = std::max(s.k_heads, s.v_heads) * blocks;
    launch_items(query_items + key_items, 0, threads, [&](std::int64_t w, float*) {
      if (w < query_items) {
        const std::int64_t h = w / query_blocks, b = w % query_blocks, i0 = b * flash_block;
        const std::int64_t n = std::min(flash_block, s.len - i0);
        const float* q = s.q + (i0 * s.q_heads + h) * s.qk_dim;
        const float* o = g.grad_out + (i0 * s.q_heads + h) * s.v_dim;
        bf16::round_rows(q_rows.data() + (h * s.len + i0) * lq, lq, q, ldq, n, s.qk_dim);
        bf16::round_rows(o_rows.data() + (h * s.len + i0) * lo, lo, o, ldo, n, s.v_dim);
        bf16::round_columns(q_cols_at(h, b), flash_block, q, ldq, s.qk_dim, n);
        bf16::round_columns(o_cols_at(h, b), flash_block, o, ldo, s.v_dim, n);
        return;
      }
      const std::int64_t head = (w - query_items) / blocks, b = (w - query_items) % blocks;
      const std::int64_t j0 = b * flash_block, keys = std::min(flash_block, s.keys() - j0);
      if (head < s.k_heads) {
        const float* k = s.k + (j0 * s.k_heads + head) * s.qk_dim;
        bf16::pack_b(k_t.data() + (head * blocks + b) * kt_block, k, 1, ldk, s.qk_dim, keys);  // K'ᵀ
        bf16::pack_b(k_b.data() + (head * blocks + b) * kb_block, k, ldk, 1, keys, s.qk_dim);  // K'
      }
      if (head < s.v_heads)
        bf16::pack_b(v_t.data() + (head * blocks + b) * vt_block, s.v + (j0 * s.v_heads + head) * s.v_dim, 1, ldv,
                     s.v_dim, keys);  // Vᵀ
    });
  }

  bf16::element* q_cols_at(std::int64_t h, std::int64_t b) {
    return q_cols.data() + (h * query_blocks + b) * s.qk_dim * flash_block;
  }
  bf16::element* o_cols_at(std::int64_t h, std::int64_t b) {
    return o_cols.data() + (h * query_blocks + b) * s.v_dim * flash_block;
  }
  const bf16::element* q_cols_at(std::int64_t h, std::int64_t b) const {
    return q_cols.data() + (h * query_blocks + b) * s.qk_dim * flash_block;
  }
  const bf16::element* o_cols_at(std::int64_t h, std::int64_t b) const {
    return o_cols.data() + (h * query_blocks + b) * s.v_dim * flash_block;
  }

  /// Work space: dS rounded to bf16 rows, P and dS packed as B, and dK'ᵀ, dVᵀ of a key block.
  static std::int64_t bf16_floats(std::int64_t elements) { return line_floats((elements + 1) / 2); }
  std::int64_t work_floats() const {
    constexpr std::int64_t B = flash_block;
    return bf16_floats(B * bf16::row_elements(B)) + 2 * bf16_floats(bf16::packed_elements(B, B)) +
           line_floats(s.qk_dim * B) + line_floats(s.v_dim * B);
  }
  struct work_parts {
    bf16::element *ds_rows, *p_packed, *ds_packed;
    float *dk_t, *dv_t;  // [qk_dim × 64], [v_dim × 64]
  };
  work_parts parts(const backward_tiles& t) const {
    constexpr std::int64_t B = flash_block;
    work_parts w;
    float* at = t.work;
    const auto take = [&](std::int64_t floats) { float* p = at; at += floats; return p; };
    w.ds_rows = reinterpret_cast<bf16::element*>(take(bf16_floats(B * bf16::row_elements(B))));
    w.p_packed = reinterpret_cast<bf16::element*>(take(bf16_floats(bf16::packed_elements(B, B))));
    w.ds_packed = reinterpret_cast<bf16::element*>(take(bf16_floats(bf16::packed_elements(B, B))));
    w.dk_t = take(line_floats(s.qk_dim * B));
    w.dv_t = take(line_floats(s.v_dim * B));
    return w;
  }

  void logits(const backward_tiles& t, std::int64_t h, std::int64_t kh, std::int64_t vh, std::int64_t i0,
              std::int64_t rows, std::int64_t jb, std::int64_t cols, const float* toeplitz) const {
    bf16::multiply(t.p, t.ld, q_rows.data() + (h * s.len + i0) * lq, lq, k_t.data() + (kh * blocks + jb) * kt_block, rows,
                   cols, s.qk_dim, false, toeplitz);
    bf16::multiply(t.ds, t.ld, o_rows.data() + (h * s.len + i0) * lo, lo, v_t.data() + (vh * blocks + jb) * vt_block,
                   rows, cols, s.v_dim, false);
  }

  void add_dq(const backward_tiles& t, float* grad_q, std::int64_t h, std::int64_t kh, std::int64_t i0,
              std::int64_t jb, std::int64_t queries, std::int64_t keys) const {
    const work_parts w = parts(t);
    const std::int64_t ld = bf16::row_elements(keys);
    bf16::round_rows(w.ds_rows, ld, t.ds, t.ld, queries, keys);
    bf16::multiply(grad_q + (i0 * s.q_heads + h) * s.qk_dim, s.q_heads * s.qk_dim, w.ds_rows, ld,
                   k_b.data() + (kh * blocks + jb) * kb_block, queries, s.qk_dim, keys, true);
  }

  /// dVᵀ and dK'ᵀ of the key block summed in the work space over head h's query blocks, then
  /// added (transposed) into the gradients' rows by finish().
  struct key_gradients {
    const bf16_backward_products& p;
    const backward_tiles& t;
    work_parts w;
    float *dK, *dV;
    std::int64_t keys;
    void add(std::int64_t h, std::int64_t ib, std::int64_t queries) const {
      const flash_sequence& s = p.s;
      constexpr std::int64_t B = flash_block;
      bf16::pack_b(w.p_packed, t.p, t.ld, 1, queries, keys);    // P [queries × keys]
      bf16::pack_b(w.ds_packed, t.ds, t.ld, 1, queries, keys);  // dS [queries × keys]
      bf16::multiply(w.dv_t, B, p.o_cols_at(h, ib), B, w.p_packed, s.v_dim, keys, queries, true);
      bf16::multiply(w.dk_t, B, p.q_cols_at(h, ib), B, w.ds_packed, s.qk_dim, keys, queries, true);
    }
    void finish() const {
      const flash_sequence& s = p.s;
      constexpr std::int64_t B = flash_block;
      for (std::int64_t j = 0; j < keys; ++j) {
        float* dv = dV + j * s.v_heads * s.v_dim;
        float* dk = dK + j * s.k_heads * s.qk_dim;
        for (int c = 0; c < s.v_dim; ++c) dv[c] += w.dv_t[c * B + j];
        for (int c = 0; c < s.qk_dim; ++c) dk[c] += w.dk_t[c * B + j];
      }
    }
  };
  key_gradients key_block(const backward_tiles& t, const flash_gradients& g, std::int64_t kh, std::int64_t vh,
                          std::int64_t j0, std::int64_t keys) const {
    const work_parts w = parts(t);
    std::fill_n(w.dk_t, s.qk_dim * flash_block, 0.0f);
    std::fill_n(w.dv_t, s.v_dim * flash_block, 0.0f);
    return {*this, t, w, g.grad_k + (j0 * s.k_heads + kh) * s.qk_dim, g.grad_v + (j0 * s.v_heads + vh) * s.v_dim, keys};
  }
};

}  // namespace grape::cpu::detail
