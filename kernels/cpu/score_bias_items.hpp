#pragma once
// Per-row bodies of the score-bias tiles: one item = one (head, query) row of k_len keys.
#include <cstdint>

#include "common/bias_tile.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "grape/math/bias.hpp"

namespace grape::cpu::detail {

struct alibi_row {
  tile_shape t;
  const float* slopes;
  void operator()(std::int64_t row, float*) const {
    const std::int64_t h = row / t.q_len, i = t.q_start + row % t.q_len;
    float* out = t.out + row * t.k_len;
    const float slope = slopes[h];
#pragma omp simd
    for (std::int64_t c = 0; c < t.k_len; ++c) out[c] = math::alibi_bias(slope, i, t.k_start + c);
  }
};

struct t5_row {
  tile_shape t;
  const float* table;
  int num_buckets, max_distance;
  bool bidirectional;
  void operator()(std::int64_t row, float*) const {
    const std::int64_t h = row / t.q_len, i = t.q_start + row % t.q_len;
    float* out = t.out + row * t.k_len;
    for (std::int64_t c = 0; c < t.k_len; ++c) {
      const int b = math::t5_bucket(t.k_start + c - i, bidirectional, num_buckets, max_distance);
      out[c] = table[static_cast<std::int64_t>(b) * t.heads + h];
    }
  }
};

struct fox_row {
  tile_shape t;
  const double* prefix;
  std::int64_t seq_len;
  float masked;
  void operator()(std::int64_t row, float*) const {
    const std::int64_t h = row / t.q_len, i = t.q_start + row % t.q_len;
    const double* f = prefix + h * seq_len;
    float* out = t.out + row * t.k_len;
    for (std::int64_t c = 0; c < t.k_len; ++c) {
      const std::int64_t j = t.k_start + c;
      out[c] = j <= i ? static_cast<float>(f[i] - f[j]) : masked;
    }
  }
};

}  // namespace grape::cpu::detail
