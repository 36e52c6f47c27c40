#pragma once
// The backward's operands packed once per sequence for Eigen's GEMM kernel (packed_gemm.hpp), in
// the orientation each of its five products takes them; every product is computed transposed, so
// that its result is column-major where grape's row-major tiles and gradients are:
//   Sᵀ   = K_j·Q_iᵀ        lhs k_rows,  rhs q_rhs       dQ_iᵀ += K_jᵀ·dSᵀ   lhs k_cols
//   dPᵀ  = V_j·dO_iᵀ       lhs v_rows,  rhs o_rhs       dK_jᵀ += Q_iᵀ·dS    lhs q_cols
//   dV_jᵀ += dO_iᵀ·P       lhs o_cols
// with i a 64-query block and j a 64-key block (flash_block). An Eigen product would pack both of
// its operands again for every tile pair (docs/performance.md, appendix "Fused attention").
#include <cstdint>

#include "cpu/flash_mask.hpp"
#include "cpu/launch.hpp"
#include "cpu/packed_gemm.hpp"

namespace grape::cpu::detail {

/// dO and D beside flash_sequence's operands (its `out` is the forward's output): dO [len,
/// q_heads, v_dim], D [len, q_heads]; the gradients of the encoded operands, written: dQ' like
/// Q, dK' like K, dV like V.
struct flash_gradients {
  const float* grad_out = nullptr;
  const float* delta = nullptr;
  float* grad_q = nullptr;
  float* grad_k = nullptr;
  float* grad_v = nullptr;
};

struct flash_backward_operands {
  packed::blocks k_rows, v_rows, k_cols, q_cols, o_cols;  // per head and 64-token block
  packed::blocks q_rhs, o_rhs;                            // per head, the whole sequence
  /// Qᵀ or dOᵀ from query i0 on, as a packed rhs (i0 a multiple of 64, hence of its panels).
  const float* queries(std::int64_t h, std::int64_t i0, int dim) const { return q_rhs.at(h, 0) + i0 * dim; }
  const float* grad_outs(std::int64_t h, std::int64_t i0, int dim) const { return o_rhs.at(h, 0) + i0 * dim; }
};

inline flash_backward_operands pack_backward_operands(const flash_sequence& s, const flash_gradients& g,
                                                      int threads) {
  using packed::lhs_floats;
  constexpr std::int64_t B = flash_block;
  const std::int64_t blocks = (s.len + B - 1) / B, key_blocks = (s.keys() + B - 1) / B;
  flash_backward_operands p;
  p.k_rows.shape(s.k_heads, key_blocks, lhs_floats(B, s.qk_dim));
  p.k_cols.shape(s.k_heads, key_blocks, lhs_floats(B, s.qk_dim));
  p.v_rows.shape(s.v_heads, key_blocks, lhs_floats(B, s.v_dim));
  p.q_cols.shape(s.q_heads, blocks, lhs_floats(B, s.qk_dim));
  p.o_cols.shape(s.q_heads, blocks, lhs_floats(B, s.v_dim));
  p.q_rhs.shape(s.q_heads, 1, s.len * s.qk_dim);
  p.o_rhs.shape(s.q_heads, 1, s.len * s.v_dim);
  const std::int64_t ldk = s.k_heads * s.qk_dim, ldv = s.v_heads * s.v_dim;
  const std::int64_t ldq = s.q_heads * s.qk_dim, ldo = s.q_heads * s.v_dim;
  // Items: per (head, block) the lhs blocks of K and V, then of Q and dO; then per head the rhs.
  const std::int64_t key_items = std::max(s.k_heads, s.v_heads) * key_blocks, query_items = s.q_heads * blocks;
  launch_items(key_items + query_items + s.q_heads, 0, threads, [&](std::int64_t w, float*) {
    if (w < key_items) {
      const std::int64_t head = w / key_blocks, b = w % key_blocks, j0 = b * B, n = std::min(B, s.keys() - j0);
      if (head < s.k_heads) {
        const float* k = s.k + (j0 * s.k_heads + head) * s.qk_dim;
        packed::pack_lhs<Eigen::RowMajor>(p.k_rows.at(head, b), k, ldk, n, s.qk_dim);
        packed::pack_lhs<Eigen::ColMajor>(p.k_cols.at(head, b), k, ldk, s.qk_dim, n);
      }
      if (head < s.v_heads)
        packed::pack_lhs<Eigen::RowMajor>(p.v_rows.at(head, b), s.v + (j0 * s.v_heads + head) * s.v_dim, ldv, n,
                                          s.v_dim);
    } else if (w < key_items + query_items) {
      const std::int64_t head = (w - key_items) / blocks, b = (w - key_items) % blocks;
      const std::int64_t i0 = b * B, n = std::min(B, s.len - i0);
      packed::pack_lhs<Eigen::ColMajor>(p.q_cols.at(head, b), s.q + (i0 * s.q_heads + head) * s.qk_dim, ldq,
                                        s.qk_dim, n);
      packed::pack_lhs<Eigen::ColMajor>(p.o_cols.at(head, b), g.grad_out + (i0 * s.q_heads + head) * s.v_dim, ldo,
                                        s.v_dim, n);
    } else {
      const std::int64_t head = w - key_items - query_items;
      packed::pack_rhs(p.q_rhs.at(head, 0), s.q + head * s.qk_dim, ldq, s.qk_dim, s.len);
      packed::pack_rhs(p.o_rhs.at(head, 0), g.grad_out + head * s.v_dim, ldo, s.v_dim, s.len);
    }
  });
  return p;
}

}  // namespace grape::cpu::detail
