#pragma once
// A score-bias tile as a caller asks for it (bias_tile: [heads, q_len, k_len] float32 at out, for
// query positions [q_start, q_start + q_len) and key positions [k_start, k_start + k_len)), its
// shape as the row bodies read it (tile_shape: plain data, device-safe), and the checks both
// backends make of a tile over a token sequence. Bad tiles throw grape::input_error.
#include <cstdint>
#include <string>

#include "grape/detail/error.hpp"

namespace grape::kernel {

/// Query positions [q_start, q_start + q_len) × key positions [k_start, k_start + k_len).
struct bias_tile {
  float* out = nullptr;            // [heads, q_len, k_len]
  std::int64_t heads = 0;
  std::int64_t q_start = 0;
  std::int64_t q_len = 0;
  std::int64_t k_start = 0;
  std::int64_t k_len = 0;
  int threads = 0;                 // OpenMP threads; 0 = default
};

struct tile_shape {
  float* out;
  std::int64_t heads, q_start, q_len, k_start, k_len;
};

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

/// The tile as its row bodies read it.
inline tile_shape shape_of(const bias_tile& t) { return {t.out, t.heads, t.q_start, t.q_len, t.k_start, t.k_len}; }

}  // namespace grape::kernel
