#pragma once
// The arguments of decode attention over a paged KV cache (cpu::attention_decode,
// cuda::attention_decode; what it computes: cpu/attention_decode.hpp), the checks that read no
// array, and the work item's size both backends split keys by.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "common/qk_args.hpp"

namespace grape::kernel {

/// Where a paged cache keeps each sequence's tokens (vLLM's block table).
struct page_table {
  std::int64_t blocks = 0;                     // blocks in the cache
  std::int64_t block_size = 0;                 // slots per block
  const std::int32_t* block_table = nullptr;   // [batch, max_blocks]: each sequence's blocks in order
  std::int64_t max_blocks = 0;                 // columns of block_table
  const std::int64_t* seq_lens = nullptr;      // [batch]: cached tokens per sequence (>= 1)
};

struct decode_args : page_table {
  dtype type = dtype::f32;                     // storage of Q, the cache and the output
  const void* q = nullptr;                     // [batch, q_heads, head_dim], contiguous
  std::int64_t batch = 0;
  std::int64_t q_heads = 0;
  std::int64_t kv_heads = 0;                   // heads of the cache; divides q_heads
  paged_cache k;                               // pages of K (already encoded by rotate_qk's KV write)
  paged_cache v;                               // pages of V
  const std::int64_t* q_positions = nullptr;   // [batch] or null: seq_lens[b] − 1
  std::int64_t max_position = std::numeric_limits<std::int64_t>::max();  // query positions must be below
  int v_dim = 0;                               // 0: head_dim
  void* out = nullptr;                         // [batch, q_heads, v_dim], contiguous, storage type
  float* lse = nullptr;                        // [q_heads, batch] log-sum-exp, or null
  std::int64_t window = 0;                     // > 0: keys less than `window` before the query
  float scale = 0;                             // 0: 1/sqrt(head_dim)
  int threads = 0;
};

/// The checks of attention_decode that read no array (shapes, strides, sizes): the CUDA decode's
/// host checks, whose arrays are device memory.
void check_decode_shape(const decode_args& a, int head_dim, int v_dim);

/// Tokens per work item: whole pages, about 1024 tokens, whatever the thread count (so the result
/// does not depend on it).
inline std::int64_t decode_chunk(std::int64_t block_size) {
  return block_size * std::max<std::int64_t>(1, 1024 / block_size);
}

}  // namespace grape::kernel
