#pragma once
// The shape of a score-bias tile as its row bodies read it: [heads, q_len, k_len] float32 at out,
// queries [q_start, q_start + q_len), keys [k_start, k_start + k_len). Plain data (device-safe).
#include <cstdint>

namespace grape::cpu::detail {

struct tile_shape {
  float* out;
  std::int64_t heads, q_start, q_len, k_start, k_len;
};

}  // namespace grape::cpu::detail
