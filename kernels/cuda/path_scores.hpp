#pragma once
// GRAPE-AP's path-integral bias (grape_ap_relative) as the CUDA flash attention's functor:
//
//   b_h(m, n) = Σ_{ℓ=n+1..m} t_h(m, ℓ),  t_h(m, ℓ) = slope_h·log σ(⟨p_m, R(ℓ − m)p̂_ℓ⟩/P),
//
// −∞ for n > m. A logit's bias is a sum along the path between its two positions, so this functor,
// unlike the others, walks: each query row keeps a row_state in the flash programs' shared memory,
// the path sum at the key position it last reached, and moving to another key adds the terms in
// between (going down) or takes them away (going up). Any order of keys is right; a monotone one
// costs O(1) terms per key. The forward visits keys from the last down, each term once and in
// cpu::attention's order (the same float64 sums); the backward's query programs go up, as the
// gradient needs.
//
// dL/dp (the CPU's layout, [heads, length, P]) streams in the backward's query programs: a term's
// gradient needs dL/dt(m, ℓ) = Σ_{n<ℓ} dL/db(m, n), the running sum of the row's dS over its keys
// from the first up, kept in a second row_state. Each term adds into float64 accumulators of
// dL/dp_m and dL/dp̂_ℓ (atomic on the device: sequences of a batch share the positions' table),
// and finish_grad adds the RMS normalisation's backward per token. C++17: the flash .cu files
// include it.
#include <cmath>
#include <cstdint>

#include "cuda/block_program.hpp"
#include "cuda/path_integral_grad_thread.hpp"
#include "grape/config.hpp"
#include "grape/math/gated_path_bias.hpp"

namespace grape::cuda {

/// A query row's walk along its path: `sum` at key position `reached`.
struct row_state {
  double sum;
  std::int64_t reached;
};

/// The bias's arrays and its term, t_h(m, ℓ) for ℓ <= m.
struct path_terms {
  int heads = 0, dim = 0;  // P, even
  std::int64_t length = 0;
  double norm_eps = 0;
  const double* slopes = nullptr;      // [heads]
  const double* rows = nullptr;        // [heads, length, P]: p
  const double* keys = nullptr;        // [heads, length, P]: p̂
  const double* offset_cos = nullptr;  // [length]: cos(−d), d = m − ℓ
  const double* offset_sin = nullptr;  // [length]: sin(−d)

  GRAPE_HOST_DEVICE double operator()(std::int64_t h, std::int64_t m, std::int64_t l) const {
    return math::path_integral_term(rows + (h * length + m) * dim, keys + (h * length + l) * dim, dim,
                                    offset_cos[m - l], offset_sin[m - l], slopes[h]);
  }
};

struct path_integral_scores {
  static constexpr bool none = false;
  path_terms terms;

  /// Where a row's walk starts: its own position, the empty path.
  GRAPE_HOST_DEVICE static row_state row_start(std::int64_t m) { return {0.0, m}; }

  struct row {
    path_terms t;
    std::int64_t h, m;
    row_state* state;
    GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float operator()(std::int64_t n) const {
      if (n > m || n < 0 || m >= t.length) return -INFINITY;  // a position outside: the launch flags it
      row_state& w = *state;
      while (w.reached > n) w.sum += t(h, m, w.reached--);
      while (w.reached < n) w.sum -= t(h, m, ++w.reached);
      return static_cast<float>(w.sum);
    }
  };
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE row row_of(std::int64_t h, std::int64_t m, row_state* state) const {
    return {terms, h, m, state};
  }

  // The gradient. Accumulators: dL/dp_m then dL/dp̂_ℓ, [2, heads, length, P] doubles, zeroed.
  GRAPE_HOST_DEVICE std::int64_t grad_size(int h) const { return static_cast<std::int64_t>(h) * terms.length * terms.dim; }
  GRAPE_HOST_DEVICE std::int64_t accumulator_size(int h) const { return 2 * grad_size(h); }
  /// The gradient's walk starts below every term (ℓ >= 1) with nothing summed.
  GRAPE_HOST_DEVICE static row_state grad_start() { return {0.0, 0}; }
  /// Key n of row m with dS = g: the terms ℓ <= reached already added without it get g now (a
  /// key below the walk); the walk moves up to n, adding each term it passes with the sum so far.
  GRAPE_HOST_DEVICE void key_grad(std::int64_t h, std::int64_t m, std::int64_t n, float g, row_state& w,
                                  double* acc) const {
    if (n >= m || n < 0 || m >= terms.length) return;  // the diagonal's path is empty; outside: −∞, g = 0
    if (n < w.reached) {
      add_terms(h, m, n + 1, w.reached, g, acc);
    } else {
      add_terms(h, m, w.reached + 1, n, w.sum, acc);
      w.reached = n;
    }
    w.sum += g;
  }
  /// After the row's last key: the terms above the walk, up to the row's own position.
  GRAPE_HOST_DEVICE void end_grad(std::int64_t h, std::int64_t m, const row_state& w, double* acc) const {
    if (m >= 0 && m < terms.length) add_terms(h, m, w.reached + 1, m, w.sum, acc);
  }
  /// dt·dt(m, ℓ)/dp for ℓ in [first, last].
  GRAPE_HOST_DEVICE void add_terms(std::int64_t h, std::int64_t m, std::int64_t first, std::int64_t last, double dt,
                                   double* acc) const {
    if (dt == 0) return;
    const path_terms& t = terms;
    const std::int64_t side = static_cast<std::int64_t>(t.heads) * t.length * t.dim;
    const double* x = t.rows + (h * t.length + m) * t.dim;
    for (std::int64_t l = first; l <= last; ++l)
      add_path_term_grad(x, t.keys + (h * t.length + l) * t.dim, t.dim, t.offset_cos[m - l], t.offset_sin[m - l],
                         t.slopes[h], dt, acc + (h * t.length + m) * t.dim, true, acc + side + (h * t.length + l) * t.dim);
  }
  /// dL/dp of head h into grad (zeroed): the row side plus the normalisation's backward of the key side.
  GRAPE_HOST_DEVICE void finish_grad(std::int64_t h, const double* acc, double* grad) const {
    const path_terms& t = terms;
    const std::int64_t side = static_cast<std::int64_t>(t.heads) * t.length * t.dim;
    for (std::int64_t e = h * t.length * t.dim; e < (h + 1) * t.length * t.dim; ++e) grad[e] = acc[e];
    for (std::int64_t token = h * t.length; token < (h + 1) * t.length; ++token)
      add_path_rms_backward(t.rows + token * t.dim, acc + side + token * t.dim, t.dim, t.norm_eps, grad + token * t.dim);
  }
};

}  // namespace grape::cuda
