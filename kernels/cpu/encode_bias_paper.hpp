#pragma once
// Bias tiles of the GRAPE paper's content-dependent biases (included from encode_bias.hpp):
//   cpu::bias_tile_of(grape_a_key_gated::make(p), tile);  cpu::bias_tile_of(grape_ap_relative::make(p), tile);
// Positions are token indices into the instance's sequence, so both ranges must lie in
// [0, length). Each element is computed in float64 from the instance's data and rounded once;
// keys after the query get −∞ (the causal mask).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "cpu/launch.hpp"
#include "cpu/score_bias.hpp"
#include "grape/detail/error.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "grape/inject/score_bias.hpp"

namespace grape::cpu {
namespace detail {

inline void require_tile_heads(const bias_tile& tile, int heads) {
  if (tile.heads != heads)
    throw input_error("tile.heads must equal the encoding's heads (" + std::to_string(heads) + ")");
}

/// The shape checks of a tile over a token sequence of the given length.
inline void require_tile_in_sequence(const bias_tile& tile, int heads, std::int64_t length) {
  require_tile_heads(tile, heads);
  if (tile.out == nullptr) throw input_error("tile.out is null");
  if (tile.q_len < 0) throw input_error("tile.q_len is negative");
  if (tile.k_len < 0) throw input_error("tile.k_len is negative");
  if (tile.q_start < 0) throw input_error("tile.q_start is negative");
  if (tile.k_start < 0) throw input_error("tile.k_start is negative");
  if (tile.threads < 0) throw input_error("tile.threads is negative");
  // Written as subtractions: no overflow for any non-negative start and length.
  if (tile.q_len > 0 && tile.q_start > length - tile.q_len)
    throw input_error("tile.q_start + tile.q_len must be <= the sequence length (" + std::to_string(length) + ")");
  if (tile.k_len > 0 && tile.k_start > length - tile.k_len)
    throw input_error("tile.k_start + tile.k_len must be <= the sequence length (" + std::to_string(length) + ")");
}

constexpr float masked = -std::numeric_limits<float>::infinity();

/// One (head, query) row of a gated linear bias: −(i − j)·ω_h·(g_q(i) + g_k(j)), O(1) per key.
struct gated_linear_row {
  const gated_linear_bias& b;
  const bias_tile& t;
  void operator()(std::int64_t item, float*) const {
    const std::int64_t h = item / t.q_len, r = item % t.q_len, i = t.q_start + r;
    const double* key_gate = b.key_gate.data() + h * b.length;
    const double query_gate = b.query_gate.empty() ? 0.0 : b.query_gate[h * b.length + i];
    float* out = t.out + item * t.k_len;
    for (std::int64_t c = 0; c < t.k_len; ++c) {
      const std::int64_t j = t.k_start + c;
      out[c] = j > i ? masked
                     : static_cast<float>(-static_cast<double>(i - j) * b.omega[h] * (key_gate[j] + query_gate));
    }
  }
};

/// One (head, query) row of the path-integral bias. Each term depends on the row i, so there are
/// no prefix sums across rows; within the row, b(i, j) = Σ_{j<ℓ≤i} term(ℓ) is a suffix sum over ℓ,
/// accumulated from the diagonal down to the tile's first key: O(i − k_start) terms, O(1) memory.
struct path_integral_row {
  const path_integral_bias& b;
  const bias_tile& t;
  void operator()(std::int64_t item, float*) const {
    const std::int64_t h = item / t.q_len, r = item % t.q_len, i = t.q_start + r;
    const std::int64_t k_end = t.k_start + t.k_len;
    float* out = t.out + item * t.k_len;
    for (std::int64_t j = std::max(t.k_start, i + 1); j < k_end; ++j) out[j - t.k_start] = masked;
    double sum = 0;  // Σ_{j<ℓ≤i} term(ℓ) for the current j
    for (std::int64_t j = i; j >= t.k_start; --j) {
      if (j < i) sum += b.term(static_cast<int>(h), i, j + 1, static_cast<double>(j + 1 - i));
      if (j < k_end) out[j - t.k_start] = static_cast<float>(sum);
    }
  }
};

}  // namespace detail

/// grape_a_key_gated and grape_a_qk_gated.
inline void bias_tile_of(const bias_instance<gated_linear_bias>& inst, const bias_tile& tile) {
  detail::require_tile_in_sequence(tile, inst.heads(), inst.bias.length);
  detail::launch_items(tile.heads * tile.q_len, 0, tile.threads, detail::gated_linear_row{inst.bias, tile});
}

/// grape_ap_relative: per row O(k_len + i − k_start) terms of O(P) each.
inline void bias_tile_of(const bias_instance<path_integral_bias>& inst, const bias_tile& tile) {
  detail::require_tile_in_sequence(tile, inst.heads(), inst.bias.length);
  detail::launch_items(tile.heads * tile.q_len, 0, tile.threads, detail::path_integral_row{inst.bias, tile});
}

}  // namespace grape::cpu
