#pragma once
// The flash-attention backward on float32 operands already encoded (cpu/flash_loop.hpp's
// forward): each tile's probabilities are recomputed from the forward's log-sum-exp,
//   P = exp(S − lse),  dV += Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ∘ (dP − D),  D_i = Σ_c dO_ic·O_ic,
//   dQ' += dS·K',  dK' += dSᵀ·Q',
// never a T×T buffer. Two passes, so that every output row has one owner and no thread adds into
// another's rows: key blocks (dK', dV) and query blocks (dQ' and the bias's parameter gradient,
// through BiasWithGradient's accumulate_grad). Each pass recomputes S and dP: 2 of the forward's
// 2 matrix products more than a one-pass kernel with atomic dQ' adds, in exchange for a result
// that does not depend on the thread count.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/flash_loop.hpp"
#include "cpu/launch.hpp"
#include "cpu/threads.hpp"

namespace grape::cpu::detail {

/// One sequence's backward operands beside flash_sequence's (its `out` is the forward's output):
/// dO [len, q_heads, v_dim], D [len, q_heads]; the gradients of the encoded operands, written:
/// dQ' like Q, dK' like K, dV like V.
struct flash_gradients {
  const float* grad_out = nullptr;
  const float* delta = nullptr;
  float* grad_q = nullptr;
  float* grad_k = nullptr;
  float* grad_v = nullptr;
};

/// The key pass asks for no logit gradients.
struct no_logit_gradient {
  void operator()(std::int64_t, std::int64_t, float) const {}
};

/// Whether some query of [i0, i1) sees some key of [j0, j1).
inline bool block_visible(const flash_sequence& s, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                          std::int64_t j1) {
  if (s.causal && i1 - 1 < j0) return false;
  if (s.window <= 0) return true;
  const std::int64_t gap = s.causal ? std::max<std::int64_t>(0, i0 - (j1 - 1))
                                    : std::max({std::int64_t{0}, i0 - (j1 - 1), j0 - (i1 - 1)});
  return gap < s.window;
}

using flash_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using flash_map = Eigen::Map<const flash_matrix, 0, Eigen::OuterStride<>>;
using flash_out_map = Eigen::Map<flash_matrix, 0, Eigen::OuterStride<>>;

/// Rows of head h from `first`: [rows, dim] with the token stride of `heads` heads.
inline flash_map rows_of(const float* x, std::int64_t first, std::int64_t rows, std::int64_t heads, std::int64_t h,
                         int dim) {
  return flash_map(x + (first * heads + h) * dim, rows, dim, Eigen::OuterStride<>(heads * dim));
}
inline flash_out_map rows_of(float* x, std::int64_t first, std::int64_t rows, std::int64_t heads, std::int64_t h,
                             int dim) {
  return flash_out_map(x + (first * heads + h) * dim, rows, dim, Eigen::OuterStride<>(heads * dim));
}

/// P and dS of the tile (queries [i0, i1), keys [j0, j1)) of query head h, on whole tiles as the
/// forward computes them; `on_logit(i, j, ds)`, when given, sees each visible logit's gradient.
template <class Bias, class OnLogit>
void backward_tile(const flash_sequence& s, const flash_gradients& g, std::int64_t h, std::int64_t i0, std::int64_t i1,
                   std::int64_t j0, std::int64_t j1, const Bias& bias, flash_matrix& P, flash_matrix& dS,
                   const OnLogit* on_logit) {
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  const std::int64_t rows = i1 - i0, cols = j1 - j0;
  const std::int64_t kh = h / (s.q_heads / s.k_heads), vh = h / (s.q_heads / s.v_heads);
  P.noalias() = rows_of(s.q, i0, rows, s.q_heads, h, s.qk_dim) * rows_of(s.k, j0, cols, s.k_heads, kh, s.qk_dim).transpose();
  dS.noalias() = rows_of(g.grad_out, i0, rows, s.q_heads, h, s.v_dim) *
                 rows_of(s.v, j0, cols, s.v_heads, vh, s.v_dim).transpose();
  add_bias_and_mask(s, bias, h, i0, j0, P);
  // lse and D of the rows; a row that saw nothing (lse = −∞) gets P = 0 through a shift of +∞.
  const Eigen::Map<const Eigen::ArrayXf> lse(s.lse + h * s.lse_stride + s.first + i0, rows);
  const Eigen::Map<const Eigen::ArrayXf, 0, Eigen::InnerStride<>> D(g.delta + i0 * s.q_heads + h, rows,
                                                                    Eigen::InnerStride<>(s.q_heads));
  const Eigen::ArrayXf shift = lse.isFinite().select(lse, Eigen::ArrayXf::Constant(rows, -minus_inf));
  for (std::int64_t r = 0; r < rows; ++r) {  // row by row: Eigen vectorises exp on a contiguous row
    P.row(r).array() = (P.row(r).array() - shift[r]).exp();
    dS.row(r).array() = P.row(r).array() * (dS.row(r).array() - D[r]);
  }
  if (on_logit)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        if (P(r, c) != 0.0f) (*on_logit)(i0 + r, j0 + c, dS(r, c));
}

/// dK' and dV of key block [j0, j1) for query heads [h0, h1): every query block that sees it.
template <class Bias>
void backward_key_block(const flash_sequence& s, const flash_gradients& g, std::int64_t h0, std::int64_t h1,
                        std::int64_t j0, std::int64_t j1, const Bias& bias) {
  flash_matrix P, dS;
  constexpr const no_logit_gradient* no_logits = nullptr;
  for (std::int64_t h = h0; h < h1; ++h) {
    const std::int64_t kh = h / (s.q_heads / s.k_heads), vh = h / (s.q_heads / s.v_heads);
    auto dK = rows_of(g.grad_k, j0, j1 - j0, s.k_heads, kh, s.qk_dim);
    auto dV = rows_of(g.grad_v, j0, j1 - j0, s.v_heads, vh, s.v_dim);
    for (std::int64_t i0 = 0; i0 < s.len; i0 += flash_block) {
      const std::int64_t i1 = std::min(s.len, i0 + flash_block);
      if (!block_visible(s, i0, i1, j0, j1)) continue;
      P.resize(i1 - i0, j1 - j0);
      dS.resize(i1 - i0, j1 - j0);
      backward_tile(s, g, h, i0, i1, j0, j1, bias, P, dS, no_logits);
      dV.noalias() += P.transpose() * rows_of(g.grad_out, i0, i1 - i0, s.q_heads, h, s.v_dim);
      dK.noalias() += dS.transpose() * rows_of(s.q, i0, i1 - i0, s.q_heads, h, s.qk_dim);
    }
  }
}

/// backward_query_block's loop over the key blocks, with the bias it is given.
template <class Bias, class OnLogit>
void backward_query_block_with(const flash_sequence& s, const flash_gradients& g, std::int64_t h, std::int64_t i0,
                          std::int64_t i1, const Bias& bias, const OnLogit* on_logit) {
  flash_matrix P, dS;
  const std::int64_t kh = h / (s.q_heads / s.k_heads);
  auto dQ = rows_of(g.grad_q, i0, i1 - i0, s.q_heads, h, s.qk_dim);
  for (std::int64_t j0 = 0; j0 < s.len; j0 += flash_block) {
    const std::int64_t j1 = std::min(s.len, j0 + flash_block);
    if (!block_visible(s, i0, i1, j0, j1)) continue;
    P.resize(i1 - i0, j1 - j0);
    dS.resize(i1 - i0, j1 - j0);
    backward_tile(s, g, h, i0, i1, j0, j1, bias, P, dS, on_logit);
    dQ.noalias() += dS * rows_of(s.k, j0, j1 - j0, s.k_heads, kh, s.qk_dim);
  }
}

/// dQ' of query block [i0, i1) of head h; on_logit(i, j, ds) for the bias's gradient, or null. A
/// bias with row_block (GRAPE-AP) computes the block's rows once, as the forward does.
template <class Bias, class OnLogit>
void backward_query_block(const flash_sequence& s, const flash_gradients& g, std::int64_t h, std::int64_t i0,
                          std::int64_t i1, const Bias& bias, const OnLogit* on_logit) {
  if constexpr (requires { bias.row_block(h, i0, i1 - i0); }) {
    const auto block = bias.row_block(h, i0, i1 - i0);
    return backward_query_block_with(s, g, h, i0, i1, block, on_logit);
  } else {
    return backward_query_block_with(s, g, h, i0, i1, bias, on_logit);
  }
}

/// An accumulator that takes a query's whole row of logit gradients at once:
/// row(thread, h, i, ds, len) with ds over every key [0, len) of the sequence (0 where unseen).
template <class F>
struct whole_rows {
  F row;
};
template <class A>
constexpr bool takes_whole_rows = false;
template <class F>
constexpr bool takes_whole_rows<whole_rows<F>> = true;

/// The backward of one sequence: dQ', dK', dV (zeroed here) and, when `accumulate` is given, the
/// bias's per-thread accumulators: `accumulate(thread, h, i, j, ds)` for each visible logit, or a
/// whole_rows accumulator once per query row (the query block's rows held as [rows, len] floats).
template <class Bias, class Accumulate>
void flash_sequence_backward(const flash_sequence& s, const flash_gradients& g, const Bias& bias,
                             const Accumulate* accumulate, int threads) {
  for (std::int64_t i = 0; i < s.len; ++i) {
    std::fill_n(g.grad_q + i * s.q_heads * s.qk_dim, s.q_heads * s.qk_dim, 0.0f);
    std::fill_n(g.grad_k + i * s.k_heads * s.qk_dim, s.k_heads * s.qk_dim, 0.0f);
    std::fill_n(g.grad_v + i * s.v_heads * s.v_dim, s.v_heads * s.v_dim, 0.0f);
  }
  const std::int64_t blocks = (s.len + flash_block - 1) / flash_block;
  // Key blocks: a group of query heads owns its K and V head's rows when K and V have the same
  // heads; otherwise one item owns the block's rows of every head.
  const std::int64_t groups = s.k_heads == s.v_heads ? s.k_heads : 1, per_group = s.q_heads / groups;
  launch_items(groups * blocks, 0, threads, [&](std::int64_t w, float*) {
    const std::int64_t group = w / blocks, b = w % blocks;
    backward_key_block(s, g, group * per_group, (group + 1) * per_group, b * flash_block,
                       std::min(s.len, (b + 1) * flash_block), bias);
  });
  launch_items(s.q_heads * blocks, 0, threads, [&](std::int64_t w, float*) {
    const std::int64_t h = w / blocks, b = w % blocks;
    const int thread = thread_index();
    const std::int64_t i0 = b * flash_block, i1 = std::min(s.len, (b + 1) * flash_block);
    if constexpr (takes_whole_rows<Accumulate>) {
      std::vector<float> rows(accumulate ? static_cast<std::size_t>((i1 - i0) * s.len) : 0, 0.0f);
      const auto on_logit = [&](std::int64_t i, std::int64_t j, float ds) { rows[(i - i0) * s.len + j] = ds; };
      backward_query_block(s, g, h, i0, i1, bias, accumulate ? &on_logit : nullptr);
      if (accumulate)
        for (std::int64_t i = i0; i < i1; ++i) accumulate->row(thread, h, i, rows.data() + (i - i0) * s.len, s.len);
    } else {
      const auto on_logit = [&](std::int64_t i, std::int64_t j, float ds) { (*accumulate)(thread, h, i, j, ds); };
      backward_query_block(s, g, h, i0, i1, bias, accumulate ? &on_logit : nullptr);
    }
  });
}

}  // namespace grape::cpu::detail
