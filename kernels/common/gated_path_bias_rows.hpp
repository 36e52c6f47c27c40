#pragma once
// The rows of the gated linear and path-integral bias tiles, as plain structs over plain arrays: one item is one
// (head, query) row of k_len keys. Device-safe: the CPU tiles (encode_bias_gated_path.hpp) run them
// over their rows with OpenMP, the CUDA tiles (kernels/cuda/gated_path_bias.cu) one element (gated) or
// one row (path integral) per thread.
// Positions are token indices into the sequence the arrays describe; keys after the query get −∞.
#include <cmath>
#include <cstdint>

#include "common/bias_tile.hpp"
#include "grape/config.hpp"
#include "grape/math/gated_path_bias.hpp"

namespace grape::kernel {

/// The causal mask's value.
GRAPE_HOST_DEVICE inline float masked_logit() { return -INFINITY; }

/// One row of a gated linear bias: −(i − j)·ω_h·(g_q(i) + g_k(j)), O(1) per key.
struct gated_linear_rows {
  tile_shape t;
  std::int64_t length;       // tokens of the gate sequence
  const double* omega;       // [heads]
  const double* key_gate;    // [heads, length]
  const double* query_gate;  // [heads, length], or null (key-gated)

  /// Element c of row `item`: what the CUDA tile computes, one element per thread.
  GRAPE_HOST_DEVICE float element(std::int64_t item, std::int64_t c) const {
    const std::int64_t h = item / t.q_len, i = t.q_start + item % t.q_len, j = t.k_start + c;
    if (j > i) return masked_logit();
    const double gq = query_gate == nullptr ? 0.0 : query_gate[h * length + i];
    return static_cast<float>(math::gated_linear_value(i - j, omega[h], key_gate[h * length + j] + gq));
  }
  GRAPE_HOST_DEVICE void operator()(std::int64_t item, float* = nullptr) const {
    float* out = t.out + item * t.k_len;
    for (std::int64_t c = 0; c < t.k_len; ++c) out[c] = element(item, c);
  }
};

/// One row of the path-integral bias. Each term depends on the row i, so there are no prefix sums
/// across rows; within the row, b(i, j) = Σ_{j<ℓ≤i} term(ℓ) is a suffix sum over ℓ, accumulated
/// from the diagonal down to the tile's first key: O(i − k_start) terms, O(1) memory.
struct path_integral_rows {
  tile_shape t;
  std::int64_t length;   // tokens
  int dim;               // P
  const double* slopes;  // [heads]
  const double* rows;    // [heads, length, P]: p
  const double* keys;    // [heads, length, P]: p̂
  const double* offset_cos;  // [length]: cos(−d), d = i − ℓ
  const double* offset_sin;  // [length]: sin(−d)

  GRAPE_HOST_DEVICE void operator()(std::int64_t item, float* = nullptr) const {
    const std::int64_t h = item / t.q_len, i = t.q_start + item % t.q_len;
    const std::int64_t k_end = t.k_start + t.k_len;
    float* out = t.out + item * t.k_len;
    for (std::int64_t j = t.k_start > i + 1 ? t.k_start : i + 1; j < k_end; ++j) out[j - t.k_start] = masked_logit();
    const double* x = rows + (h * length + i) * dim;
    double sum = 0;  // Σ_{j<ℓ≤i} term(ℓ) for the current j
    for (std::int64_t j = i; j >= t.k_start; --j) {
      if (j < i)
        sum += math::path_integral_term(x, keys + (h * length + j + 1) * dim, dim, offset_cos[i - j - 1],
                                        offset_sin[i - j - 1], slopes[h]);
      if (j < k_end) out[j - t.k_start] = static_cast<float>(sum);
    }
  }
};

}  // namespace grape::kernel
