#pragma once
// What a CUDA decode call is before it reaches the device (decode_program.hpp): its arrays (device
// pointers, the storage type erased), and the block programs built from them. Free of the CUDA
// runtime, so the host emulation builds the very programs a launch gets.
#include <cstdint>

#include "common/qk_args.hpp"
#include "cuda/decode_program.hpp"

namespace grape::cuda {

struct decode_call {
  kernel::dtype type = kernel::dtype::f32;
  decode_shape s;
  const void* q = nullptr;  // encoded queries [batch, q_heads, head_dim]
  device_pages<void> k, v;
  const std::int64_t* q_pos = nullptr;  // [batch], decode_positions'
  float scale = 1.0f;
  std::int64_t window = 0;
  float* part_max = nullptr;  // [batch, chunks, q_heads]
  float* part_sum = nullptr;  // [batch, chunks, q_heads]
  float* part_acc = nullptr;  // [batch, chunks, q_heads, v_dim]
  void* out = nullptr;        // [batch, q_heads, v_dim]
  float* lse = nullptr;       // [q_heads, batch] or null
};

/// Threads of a decode block.
inline constexpr int decode_threads = 128;

/// Scratch floats of the chunks' parts: max, sum, then the weighted values.
inline std::int64_t decode_part_floats(const decode_shape& s) {
  return s.batch * s.chunks * s.q_heads * (2 + s.v_dim);
}

/// The pages of storage T.
template <class T>
device_pages<T> typed_pages(const device_pages<void>& p) {
  return {static_cast<const T*>(p.data), p.block_stride, p.slot_stride, p.head_stride};
}

template <class T, class Bias>
decode_program<T, Bias> decode_program_of(const decode_call& c, const Bias& bias) {
  return {c.s,        static_cast<const T*>(c.q), typed_pages<T>(c.k), typed_pages<T>(c.v), c.q_pos, c.scale, c.window,
          c.part_max, c.part_sum, c.part_acc, bias};
}

template <class T>
decode_merge<T> decode_merge_of(const decode_call& c) {
  return {c.s, c.part_max, c.part_sum, c.part_acc, static_cast<T*>(c.out), c.lse};
}

/// The decode grid: (chunks, sequences, KV heads × blocks of query heads per KV head).
inline std::int64_t decode_head_blocks(const decode_shape& s) {
  const std::int64_t group = s.q_heads / s.kv_heads;
  return s.kv_heads * ((group + s.heads_per_block - 1) / s.heads_per_block);
}

}  // namespace grape::cuda
