#pragma once
// Score biases that depend on a (query, key) position pair: ALiBi and T5 relative buckets.
// Device-safe: kernel authors call these inside their own attention kernels.
#include <cmath>
#include <cstdint>

#include "grape/config.hpp"

namespace grape::math {

/// ALiBi slope of head h of H heads (Press et al.), exact rule for any H: the power-of-two rule for
/// the first P = 2^floor(log2 H) heads, then every other slope of the 2P rule.
GRAPE_HOST_DEVICE inline double alibi_slope(int head, int num_heads, double max_bias = 8.0) {
  int p = 1;
  while (2 * p <= num_heads) p *= 2;
  if (head < p) return exp2(-max_bias * (head + 1) / p);
  const int k = 2 * (head - p) + 1;  // odd index into the 2P rule, 0-based: slopes_2p[2j] = r^(2j+1)
  return exp2(-max_bias * k / (2.0 * p));
}

/// ALiBi bias for query position i and key position j: −slope·|i − j|.
GRAPE_HOST_DEVICE inline float alibi_bias(float slope, std::int64_t query_pos, std::int64_t key_pos) {
  const std::int64_t d = query_pos > key_pos ? query_pos - key_pos : key_pos - query_pos;
  return -slope * static_cast<float>(d);
}

/// T5 relative-position bucket of relative_position = key − query (Raffel et al., transformers).
GRAPE_HOST_DEVICE inline int t5_bucket(std::int64_t relative_position, bool bidirectional,
                                       int num_buckets, int max_distance) {
  int bucket = 0;
  std::int64_t n;
  if (bidirectional) {
    num_buckets /= 2;
    if (relative_position > 0) bucket += num_buckets;
    n = relative_position < 0 ? -relative_position : relative_position;
  } else {
    n = relative_position < 0 ? -relative_position : 0;
  }
  const int max_exact = num_buckets / 2;
  if (n < max_exact) return bucket + static_cast<int>(n);
  // From max_distance on, the formula below reaches num_buckets or more and is clamped to the last
  // bucket: no logarithm is needed there (most of a long sequence's offsets).
  if (n >= max_distance && max_distance > max_exact) return bucket + num_buckets - 1;
  const double scaled = log(static_cast<double>(n) / max_exact) /
                        log(static_cast<double>(max_distance) / max_exact) * (num_buckets - max_exact);
  std::int64_t large = max_exact + static_cast<std::int64_t>(scaled);
  if (large > num_buckets - 1) large = num_buckets - 1;
  return bucket + static_cast<int>(large);
}

}  // namespace grape::math
