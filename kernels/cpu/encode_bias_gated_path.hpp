#pragma once
// Bias tiles of gated GRAPE-A's linear bias and GRAPE-AP's path-integral bias (included from
// encode_bias.hpp):
//   cpu::bias_tile_of(grape_a_key_gated::make(p), tile);  cpu::bias_tile_of(grape_ap_relative::make(p), tile);
// Positions are token indices into the instance's sequence, so both ranges must lie in
// [0, length). Each element is computed in float64 from the instance's data and rounded once;
// keys after the query get −∞ (the causal mask).
#include <cstdint>
#include <string>

#include "cpu/gated_path_bias_rows.hpp"
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

/// The tile's shape for the row bodies (gated_path_bias_rows.hpp).
inline tile_shape shape_of(const bias_tile& t) { return {t.out, t.heads, t.q_start, t.q_len, t.k_start, t.k_len}; }

/// The rows of a tile over the bias's arrays (host memory here; the CUDA tiles pass device copies).
inline gated_linear_rows rows_of(const gated_linear_bias& b, const bias_tile& tile) {
  return {shape_of(tile), b.length, b.omega.data(), b.key_gate.data(), b.query_gate.empty() ? nullptr : b.query_gate.data()};
}
inline path_integral_rows rows_of(const path_integral_bias& b, const bias_tile& tile) {
  return {shape_of(tile),    b.length,      b.dim, b.slopes.data(), b.rows.data(), b.keys.data(),
          b.offset_cos.data(), b.offset_sin.data()};
}

}  // namespace detail

/// grape_a_key_gated and grape_a_qk_gated.
inline void bias_tile_of(const bias_instance<gated_linear_bias>& inst, const bias_tile& tile) {
  detail::require_tile_in_sequence(tile, inst.heads(), inst.bias.length);
  detail::launch_items(tile.heads * tile.q_len, 0, tile.threads, detail::rows_of(inst.bias, tile));
}

/// grape_ap_relative: per row O(k_len + i − k_start) terms of O(P) each.
inline void bias_tile_of(const bias_instance<path_integral_bias>& inst, const bias_tile& tile) {
  detail::require_tile_in_sequence(tile, inst.heads(), inst.bias.length);
  detail::launch_items(tile.heads * tile.q_len, 0, tile.threads, detail::rows_of(inst.bias, tile));
}

}  // namespace grape::cpu
