#pragma once
// The bias position of each token of an attention call on the device, as the CPU's positions_of
// gives it: position_ids' first axis, offsets[b] + s, or s. The bodies are host-and-device code,
// one item per token; their launches (flash_f32.cu) write the positions into a [tokens] array and
// set the error flag for a position outside its range.
#include <cstdint>

#include "grape/config.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda {

/// Token t in the flash call's numbering: b·seq_len + s padded, the packed index with cu_seqlens.
struct position_source {
  const void* ids = nullptr;  // [tokens] int32 or int64 (the first axis of position_ids), or null
  bool ids_32 = false;
  const std::int64_t* offsets = nullptr;     // [batch], or null
  const std::int64_t* cu_seqlens = nullptr;  // [batch + 1], or null: padded
  std::int64_t batch = 1, seq_len = 0;

  GRAPE_HOST_DEVICE std::int64_t at(std::int64_t t) const {
    if (ids) return ids_32 ? static_cast<const std::int32_t*>(ids)[t] : static_cast<const std::int64_t*>(ids)[t];
    std::int64_t b = 0, s = t;
    locate(t, b, s);
    return offsets ? offsets[b] + s : s;
  }

  /// The token that starts t's sequence.
  GRAPE_HOST_DEVICE std::int64_t sequence_start(std::int64_t t) const {
    std::int64_t b = 0, s = t;
    locate(t, b, s);
    return t - s;
  }

  /// Token t's sequence b and its index s in it.
  GRAPE_HOST_DEVICE void locate(std::int64_t t, std::int64_t& b, std::int64_t& s) const {
    b = 0;
    s = t;
    if (cu_seqlens) {  // the sequence holding t: the last b with cu_seqlens[b] <= t
      std::int64_t lo = 0, hi = batch - 1;
      while (lo < hi) {
        const std::int64_t mid = (lo + hi + 1) / 2;
        if (cu_seqlens[mid] <= t) lo = mid;
        else hi = mid - 1;
      }
      b = lo;
      s = t - cu_seqlens[b];
    } else if (seq_len > 0) {
      b = t / seq_len;
      s = t % seq_len;
    }
  }
};

/// out[t] = source.at(t); a position outside [0, max_position) sets *error.
struct bias_positions_of {
  position_source source;
  std::int64_t max_position = 0;
  std::int64_t* out = nullptr;
  int* error = nullptr;
  GRAPE_HOST_DEVICE void operator()(std::int64_t t) const {
    const std::int64_t p = source.at(t);
    if (p < 0 || p >= max_position) *error = 1;
    out[t] = p;
  }
};

/// Sets *error when positions[t] lies outside [0, limit).
struct position_range_check {
  const std::int64_t* positions = nullptr;
  std::int64_t limit = 0;
  int* error = nullptr;
  GRAPE_HOST_DEVICE void operator()(std::int64_t t) const {
    if (positions[t] < 0 || positions[t] >= limit) *error = 1;
  }
};

namespace detail {
/// out[t] = source.at(t) for t < tokens; a position outside [0, max_position) sets *error.
void launch_bias_positions(const position_source& source, std::int64_t tokens, std::int64_t max_position,
                           std::int64_t* out, int* error, cudaStream_t stream);
}  // namespace detail

}  // namespace grape::cuda
