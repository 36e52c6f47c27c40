#pragma once
// The score-bias part of an encoding instance as a tile (cpu/score_bias.hpp), so that a type's
// instance reaches the bias kernels as it reaches rotate_qk (encode_qk.hpp):
//   cpu::bias_tile_of(alibi::make(p), tile);        cpu::bias_tile_of(t5_buckets::make(p), tile);
//   cpu::bias_tile_of(fox::make(p), tile);           // causal: keys after the query get −∞
//   cpu::bias_tile_of(rope_alibi::make(p), tile);   // a composed encoding: its bias part
//   cpu::bias_tile_of(grape_ap_relative::make(p), tile);  // gated GRAPE-A, GRAPE-AP: encode_bias_gated_path.hpp
//   cpu::bias_tile_of(log_distance::make(p), tile);  // any bias(h, m, n) on one axis, entry by entry
// (its rotation part goes through cpu::rotate_qk(instance, args)). Tiles are float32; the
// instance's float64 slopes and tables are rounded once.
#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/encode_bias_gated_path.hpp"
#include "cpu/launch.hpp"
#include "cpu/score_bias.hpp"
#include "grape/encodings/alibi.hpp"
#include "grape/encodings/fox.hpp"
#include "grape/encodings/t5_buckets.hpp"
#include "grape/inject/compose.hpp"
#include "grape/inject/score_bias.hpp"

namespace grape::cpu {

inline void bias_tile_of(const bias_instance<alibi_bias>& inst, const bias_tile& tile) {
  detail::require_tile_heads(tile, inst.heads());
  const std::vector<float> slopes(inst.bias.slopes.begin(), inst.bias.slopes.end());
  alibi_tile(tile, slopes.data());
}

inline void bias_tile_of(const bias_instance<t5_bias>& inst, const bias_tile& tile) {
  detail::require_tile_heads(tile, inst.heads());
  const t5_bias& b = inst.bias;
  const std::vector<float> table(b.table.begin(), b.table.end());
  t5_tile(tile, table.data(), b.num_buckets, b.max_distance, b.bidirectional);
}

/// FoX: the instance's float64 prefix sums (stored from F(−1) = 0) in the tile's layout
/// [heads, length] (from F(0)); positions must lie in [0, length).
inline void bias_tile_of(const bias_instance<forget_gate_bias>& inst, const bias_tile& tile) {
  detail::require_tile_heads(tile, inst.heads());
  const forget_gate_bias& b = inst.bias;
  std::vector<double> prefix(static_cast<std::size_t>(b.num_heads * b.length));
  for (int h = 0; h < b.num_heads; ++h)
    std::copy_n(b.prefix.begin() + h * (b.length + 1) + 1, b.length, prefix.begin() + h * b.length);
  fox_tile(tile, prefix.data(), b.length);
}

/// Any other score bias on one position axis (a user's own: the tutorial's log-distance bias):
/// b.bias(h, i, j) per entry in float64, rounded once; the built-ins above have tiles of their own.
template <class B>
  requires requires(const B& b, const std::array<std::int64_t, 1>& p) {
    { b.bias(0, p, p) } -> std::convertible_to<double>;
  }
void bias_tile_of(const bias_instance<B>& inst, const bias_tile& tile) {
  detail::require_tile_in_sequence(tile, inst.heads(), std::numeric_limits<std::int64_t>::max());
  const B& b = inst.bias;
  detail::launch_items(tile.heads * tile.q_len, 0, tile.threads, [&](std::int64_t row, float*) {
    const int h = static_cast<int>(row / tile.q_len);
    const std::int64_t i = tile.q_start + row % tile.q_len;
    float* out = tile.out + row * tile.k_len;
    for (std::int64_t j = 0; j < tile.k_len; ++j)
      out[j] = static_cast<float>(b.bias(h, std::array<std::int64_t, 1>{i}, std::array<std::int64_t, 1>{tile.k_start + j}));
  });
}

template <class Rotation, class Bias>
void bias_tile_of(const composed_instance<Rotation, Bias>& inst, const bias_tile& tile) {
  bias_tile_of(inst.bias, tile);
}

}  // namespace grape::cpu
