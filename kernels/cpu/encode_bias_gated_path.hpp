#pragma once
// Bias tiles of gated GRAPE-A's linear bias and GRAPE-AP's path-integral bias (included from
// encode_bias.hpp):
//   cpu::bias_tile_of(grape_a_key_gated::make(p), tile);  cpu::bias_tile_of(grape_ap_relative::make(p), tile);
// Positions are token indices into the instance's sequence, so both ranges must lie in
// [0, length). Each element is computed in float64 from the instance's data and rounded once;
// keys after the query get −∞ (the causal mask).
#include <cstdint>
#include <string>

#include "common/gated_path_bias_rows.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/launch.hpp"
#include "cpu/score_bias.hpp"
#include "grape/detail/error.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "grape/inject/score_bias.hpp"

namespace grape::cpu {
namespace detail {

/// The tile's shape for the row bodies (gated_path_bias_rows.hpp).
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
