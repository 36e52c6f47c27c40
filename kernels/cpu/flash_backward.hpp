#pragma once
// The flash-attention backward on float32 operands already encoded (cpu/flash_loop.hpp's
// forward): each tile's probabilities are recomputed from the forward's log-sum-exp,
//   P = exp(S − lse),  dV += Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ∘ (dP − D),  D_i = Σ_c dO_ic·O_ic,
//   dQ' += dS·K',  dK' += dSᵀ·Q',
// never a T×T buffer. One pass over the key blocks: a (head group, key block) owns its dK' and dV
// rows, and its dQ' shares go to one of a few dQ' lanes (key block b to lane b mod 4, a lane's
// blocks in order on one thread, the lanes summed in order), so no thread adds into another's
// rows and the result does not depend on the thread count; each tile's P and dS serve dV, dK' and
// dQ' (5 matrix products per tile: flash_backward_products.hpp, in float32 or on bf16 tiles as the
// forward's). A bias that computes a query block's rows at once (GRAPE-AP),
// a gradient taken by whole query rows, or a problem with too few KV head groups for the lanes to
// keep the threads busy (dq_lanes) runs two passes instead, key blocks (dK', dV) and then query
// blocks (dQ' and the bias's parameter gradient), which recompute S and dP (7 products).
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/flash_backward_products.hpp"
#include "cpu/flash_loop.hpp"
#include "cpu/launch.hpp"
#include "cpu/threads.hpp"

namespace grape::cpu::detail {

/// The key pass asks for no logit gradients.
struct no_logit_gradient {
  void operator()(std::int64_t, std::int64_t, std::int64_t, float) const {}
};

/// An accumulator that also takes a whole tile's logit gradients at once:
/// tile(thread, h, i0, rows, j0, cols, dS, ld), dS row r at dS + r·ld (gated GRAPE-A's
/// accumulate_tile_grad), 0 where the logit is hidden.
template <class PerLogit, class PerTile>
struct with_tiles {
  PerLogit logit;
  PerTile tile;
  void operator()(int thread, std::int64_t h, std::int64_t i, std::int64_t j, float ds) const {
    logit(thread, h, i, j, ds);
  }
};
template <class A>
constexpr bool takes_tiles = false;
template <class F, class G>
constexpr bool takes_tiles<with_tiles<F, G>> = true;

/// The accumulator as one thread's work items see it (backward_tile's on_logit).
template <class Accumulate>
struct thread_accumulator {
  const Accumulate* accumulate;
  int thread;
  void operator()(std::int64_t h, std::int64_t i, std::int64_t j, float ds) const { (*accumulate)(thread, h, i, j, ds); }
  void whole_tile(std::int64_t h, std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t cols,
                  const float* dS, std::int64_t ld) const
    requires takes_tiles<Accumulate>
  {
    accumulate->tile(thread, h, i0, rows, j0, cols, dS, ld);
  }
};

/// Whether some query of [i0, i1) sees some key of [j0, j1).
inline bool block_visible(const flash_sequence& s, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                          std::int64_t j1) {
  j0 -= s.key_shift, j1 -= s.key_shift;  // as query indices
  if (s.causal && i1 - 1 < j0) return false;
  if (s.window <= 0) return true;
  const std::int64_t gap = s.causal ? std::max<std::int64_t>(0, i0 - (j1 - 1))
                                    : std::max({std::int64_t{0}, i0 - (j1 - 1), j0 - (i1 - 1)});
  return gap < s.window;
}

/// P and dS of the tile (queries [i0, i1), keys [j0, j1)) of query head h, on whole tiles as the
/// forward computes them; `on_logit(h, i, j, ds)`, when given, sees each visible logit's gradient.
template <class Products, class Bias, class OnLogit>
void backward_tile(const flash_sequence& s, const flash_gradients& g, const Products& ops, std::int64_t h,
                   std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1, const Bias& bias,
                   const backward_tiles& t, const OnLogit* on_logit) {
  using map = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  const std::int64_t rows = i1 - i0, cols = j1 - j0, jb = j0 / flash_block;
  const std::int64_t kh = h / (s.q_heads / s.k_heads), vh = h / (s.q_heads / s.v_heads);
  map P(t.p, rows, cols, Eigen::OuterStride<>(t.ld)), dS(t.ds, rows, cols, Eigen::OuterStride<>(t.ld));
  std::array<float, 2 * flash_block> offset_values;  // an offset bias's Toeplitz tile
  products_bias_and_mask(s, bias, h, i0, j0, P, offset_values.data(), [&](const float* toeplitz) {
    ops.logits(t, h, kh, vh, i0, rows, jb, cols, toeplitz);  // P = S (+ the bias), dS = dP for now
  });
  // lse and D of the rows; a row that saw nothing (lse = −∞) gets P = 0 through a shift of +∞.
  const Eigen::Map<const Eigen::ArrayXf> lse(s.lse + h * s.lse_stride + s.first + i0, rows);
  const Eigen::Map<const Eigen::ArrayXf, 0, Eigen::InnerStride<>> D(g.delta + i0 * s.q_heads + h, rows,
                                                                    Eigen::InnerStride<>(s.q_heads));
  const Eigen::ArrayXf shift = lse.isFinite().select(lse, Eigen::ArrayXf::Constant(rows, -minus_inf));
  for (std::int64_t r = 0; r < rows; ++r) {  // row by row: Eigen vectorises exp on a contiguous row
    P.row(r).array() = (P.row(r).array() - shift[r]).exp();
    dS.row(r).array() = P.row(r).array() * (dS.row(r).array() - D[r]);
  }
  if (on_logit) {
    if constexpr (requires { on_logit->whole_tile(h, i0, rows, j0, cols, t.ds, t.ld); })
      on_logit->whole_tile(h, i0, rows, j0, cols, t.ds, t.ld);  // a hidden logit's dS is 0
    else
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          if (P(r, c) != 0.0f) (*on_logit)(h, i0 + r, j0 + c, dS(r, c));
  }
}

/// dK' and dV of key block [j0, j1) for query heads [h0, h1): every query block that sees it. With
/// a dQ' buffer (laid out as grad_q), the one-pass backward: each tile's dS also adds its dQ'
/// contribution there, and on_logit, when given, sees each visible logit's gradient.
template <class Products, class Bias, class OnLogit = no_logit_gradient>
void backward_key_block(const flash_sequence& s, const flash_gradients& g, const Products& ops, std::int64_t h0,
                        std::int64_t h1, std::int64_t j0, std::int64_t j1, const Bias& bias, const backward_tiles& t,
                        float* grad_q = nullptr, const OnLogit* on_logit = nullptr) {
  const std::int64_t keys = j1 - j0, jb = j0 / flash_block;
  for (std::int64_t h = h0; h < h1; ++h) {
    const std::int64_t kh = h / (s.q_heads / s.k_heads), vh = h / (s.q_heads / s.v_heads);
    const auto key_gradients = ops.key_block(t, g, kh, vh, j0, keys);  // dK' and dV of the block's rows
    for (std::int64_t i0 = 0; i0 < s.len; i0 += flash_block) {
      const std::int64_t i1 = std::min(s.len, i0 + flash_block), queries = i1 - i0, ib = i0 / flash_block;
      if (!block_visible(s, i0, i1, j0, j1)) continue;
      backward_tile(s, g, ops, h, i0, i1, j0, j1, bias, t, on_logit);
      key_gradients.add(h, ib, queries);
      if (grad_q) ops.add_dq(t, grad_q, h, kh, i0, jb, queries, keys);
    }
    key_gradients.finish();
  }
}

/// backward_query_block's loop over the key blocks, with the bias it is given.
template <class Products, class Bias, class OnLogit>
void backward_query_block_with(const flash_sequence& s, const flash_gradients& g, const Products& ops,
                               std::int64_t h, std::int64_t i0, std::int64_t i1, const Bias& bias,
                               const backward_tiles& t, const OnLogit* on_logit) {
  const std::int64_t kh = h / (s.q_heads / s.k_heads), queries = i1 - i0;
  for (std::int64_t j0 = 0; j0 < s.keys(); j0 += flash_block) {
    const std::int64_t j1 = std::min(s.keys(), j0 + flash_block), keys = j1 - j0;
    if (!block_visible(s, i0, i1, j0, j1)) continue;
    backward_tile(s, g, ops, h, i0, i1, j0, j1, bias, t, on_logit);
    ops.add_dq(t, g.grad_q, h, kh, i0, j0 / flash_block, queries, keys);
  }
}

/// dQ' of query block [i0, i1) of head h; on_logit(h, i, j, ds) for the bias's gradient, or null. A
/// bias with row_block (GRAPE-AP) computes the block's rows once, as the forward does.
template <class Products, class Bias, class OnLogit>
void backward_query_block(const flash_sequence& s, const flash_gradients& g, const Products& ops,
                          std::int64_t h, std::int64_t i0, std::int64_t i1, const Bias& bias,
                          const backward_tiles& t, const OnLogit* on_logit) {
  if constexpr (requires { bias.row_block(h, i0, i1 - i0); }) {
    const auto block = bias.row_block(h, i0, i1 - i0);
    return backward_query_block_with(s, g, ops, h, i0, i1, block, t, on_logit);
  } else {
    return backward_query_block_with(s, g, ops, h, i0, i1, bias, t, on_logit);
  }
}

/// dQ' lanes of the one-pass backward: key block b adds its dQ' share into lane b % lanes, a lane's
/// key blocks in order on one thread, then the lanes are summed in order, so that dQ' does not
/// depend on the thread count. Lane 0 is grad_q itself; the others are [len, q_heads, qk_dim] each.
/// Up to four lanes, fewer where three extra dQ' buffers would pass 512 MiB; 0 (two passes) where
/// the (KV head group, lane) items would be fewer than 8, too few to keep a machine busy (MQA: the
/// two passes' items are the query heads' blocks). The problem alone decides, not the thread count.
inline std::int64_t dq_lanes(const flash_sequence& s, std::int64_t groups) {
  constexpr std::int64_t budget_bytes = std::int64_t{512} << 20, min_items = 8;
  const std::int64_t blocks = (s.keys() + flash_block - 1) / flash_block;
  const std::int64_t lane_bytes = s.len * s.q_heads * s.qk_dim * static_cast<std::int64_t>(sizeof(float));
  std::int64_t lanes = std::clamp<std::int64_t>(blocks, 1, 4);
  while (lanes > 1 && (lanes - 1) * lane_bytes > budget_bytes) --lanes;
  return groups * lanes >= min_items ? lanes : 0;
}

/// The backward in one pass over the key blocks: each tile's P and dS computed once and used for
/// dV, dK' and dQ' (the two-pass form recomputes S and dP for dQ': 7 products per tile against 5).
template <class Products, class Bias, class Accumulate>
void one_pass_backward(const flash_sequence& s, const flash_gradients& g, const Products& ops,
                       const Bias& bias, const Accumulate* accumulate, std::int64_t groups, std::int64_t per_group,
                       std::int64_t lanes, int threads) {
  const std::int64_t blocks = (s.keys() + flash_block - 1) / flash_block;
  const std::int64_t lane_floats = s.len * s.q_heads * s.qk_dim;
  std::vector<float> extra(static_cast<std::size_t>((lanes - 1) * lane_floats), 0.0f);
  const auto lane = [&](std::int64_t l) { return l == 0 ? g.grad_q : extra.data() + (l - 1) * lane_floats; };
  const int scratch = static_cast<int>(backward_tiles::scratch_floats(ops.work_floats()));
  launch_items(groups * lanes, scratch, threads, [&](std::int64_t w, float* thread_scratch) {
    const std::int64_t group = w / lanes, l = w % lanes;
    const thread_accumulator<Accumulate> on_logit{accumulate, thread_index()};
    const backward_tiles t(thread_scratch);
    for (std::int64_t b = l; b < blocks; b += lanes) {
      const std::int64_t j0 = b * flash_block, j1 = std::min(s.keys(), j0 + flash_block);
      backward_key_block(s, g, ops, group * per_group, (group + 1) * per_group, j0, j1, bias, t, lane(l),
                         accumulate ? &on_logit : nullptr);
    }
  });
  if (lanes > 1)
    launch_items(s.len, 0, threads, [&](std::int64_t i, float*) {
      float* dq = g.grad_q + i * s.q_heads * s.qk_dim;
      for (std::int64_t l = 1; l < lanes; ++l) {
        const float* add = lane(l) + i * s.q_heads * s.qk_dim;
        for (std::int64_t c = 0; c < s.q_heads * s.qk_dim; ++c) dq[c] += add[c];
      }
    });
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

/// The backward in two passes: key blocks (dK', dV), then query blocks (dQ' and the bias's
/// parameter gradient, a query block's rows at a time).
template <class Products, class Bias, class Accumulate>
void two_pass_backward(const flash_sequence& s, const flash_gradients& g, const Products& ops,
                       const Bias& bias, const Accumulate* accumulate, std::int64_t groups, std::int64_t per_group,
                       int threads) {
  const std::int64_t blocks = (s.len + flash_block - 1) / flash_block;
  const std::int64_t key_blocks = (s.keys() + flash_block - 1) / flash_block, keys = s.keys();
  const int scratch = static_cast<int>(backward_tiles::scratch_floats(ops.work_floats()));
  launch_items(groups * key_blocks, scratch, threads, [&](std::int64_t w, float* thread_scratch) {
    const std::int64_t group = w / key_blocks, b = w % key_blocks;
    backward_key_block(s, g, ops, group * per_group, (group + 1) * per_group, b * flash_block,
                       std::min(keys, (b + 1) * flash_block), bias, backward_tiles(thread_scratch));
  });
  launch_items(s.q_heads * blocks, scratch, threads, [&](std::int64_t w, float* thread_scratch) {
    const std::int64_t h = w / blocks, b = w % blocks;
    const int thread = thread_index();
    const std::int64_t i0 = b * flash_block, i1 = std::min(s.len, (b + 1) * flash_block);
    const backward_tiles t(thread_scratch);
    if constexpr (takes_whole_rows<Accumulate>) {
      std::vector<float> rows(accumulate ? static_cast<std::size_t>((i1 - i0) * keys) : 0, 0.0f);
      const auto on_logit = [&](std::int64_t, std::int64_t i, std::int64_t j, float ds) {
        rows[(i - i0) * keys + j] = ds;
      };
      backward_query_block(s, g, ops, h, i0, i1, bias, t, accumulate ? &on_logit : nullptr);
      if (accumulate)
        for (std::int64_t i = i0; i < i1; ++i) accumulate->row(thread, h, i, rows.data() + (i - i0) * keys, keys);
    } else {
      const thread_accumulator<Accumulate> on_logit{accumulate, thread};
      backward_query_block(s, g, ops, h, i0, i1, bias, t, accumulate ? &on_logit : nullptr);
    }
  });
}

/// The backward of one sequence: dQ', dK', dV (zeroed here) and, when `accumulate` is given, the
/// bias's per-thread accumulators: `accumulate(thread, h, i, j, ds)` for each visible logit, or a
/// whole_rows accumulator once per query row (the query block's rows held as [rows, len] floats).
template <class Bias, class Accumulate>
void flash_sequence_backward(const flash_sequence& s, const flash_gradients& g, const Bias& bias,
                             const Accumulate* accumulate, int threads) {
  std::fill_n(g.grad_q, s.len * s.q_heads * s.qk_dim, 0.0f);
  std::fill_n(g.grad_k, s.keys() * s.k_heads * s.qk_dim, 0.0f);
  std::fill_n(g.grad_v, s.keys() * s.v_heads * s.v_dim, 0.0f);
  // Key blocks: a group of query heads owns its K and V head's rows when K and V have the same
  // heads; otherwise one item owns the block's rows of every head.
  const std::int64_t groups = s.k_heads == s.v_heads ? s.k_heads : 1, per_group = s.q_heads / groups;
  // A bias that computes a query block's rows at once (GRAPE-AP's row_block) or an accumulator
  // that takes whole query rows wants the query blocks outermost: two passes. Otherwise one, where
  // dq_lanes allows it. The products run on bf16 tiles where the forward's did (s.bf16_products).
  const auto run = [&](const auto& ops) {
    constexpr bool by_query_rows = requires { bias.row_block(0, 0, 1); } || takes_whole_rows<Accumulate>;
    if constexpr (by_query_rows) {
      two_pass_backward(s, g, ops, bias, accumulate, groups, per_group, threads);
    } else {
      if (const std::int64_t lanes = dq_lanes(s, groups); lanes > 0)
        one_pass_backward(s, g, ops, bias, accumulate, groups, per_group, lanes, threads);
      else
        two_pass_backward(s, g, ops, bias, accumulate, groups, per_group, threads);
    }
  };
  if (s.bf16_products)
    run(bf16_backward_products(s, g, threads));
  else
    run(f32_backward_products(s, g, threads));
}

}  // namespace grape::cpu::detail
