#pragma once
// The call vocabulary both backends share for Q and K (cpu::rotate_qk, cuda::rotate_qk, the fused
// attention of either): storage types, operands and their addressing, positions, the cos/sin cache,
// the fused QK-norm and KV-cache write. Plain data, light enough for nvcc.
//
// Addressing: a tensor element (sequence b, token s of b, head h, channel c) lives at
//   padded layouts:  b·batch_stride + s·token_stride + h·head_stride + c
//   packed varlen:   t·token_stride + h·head_stride + c,   t = cu_seqlens[b] + s
// so [batch, seq, heads, dim], [batch, heads, seq, dim] and [total_tokens, heads, dim] are three
// choices of strides (in elements, 64-bit). Channels are contiguous. `out` is either `in` (in
// place) or a buffer that does not overlap `in`; it uses the same strides. Q and K (and V) may
// be views of one packed QKV buffer: their elements must be disjoint (not checked).
//
// Positions: per-token ids [num_axes, total_tokens] (int32 or int64), where the token index is
// b·seq_len + s (padded) or t (varlen); or per-sequence offsets (KV-cache decode:
// position = offsets[b] + s); or neither (position = s).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "grape/math/phase.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape::kernel {

enum class dtype { f32, f16, bf16 };
enum class index_type { i32, i64 };

/// Bytes per element of a storage type.
inline std::size_t element_bytes(dtype t) { return t == dtype::f32 ? 4 : 2; }

/// How an out-of-place call writes its output. `automatic`: non-temporal (streaming) stores when
/// the output is larger than the last-level cache, ordinary stores otherwise (glibc's memcpy
/// makes the same choice). `streaming` / `cached` force one or the other. Streaming needs a
/// rotary dim of 64, 128 or 256 and 64-byte-aligned `out` pointers and strides (on x86 with
/// vector packets); otherwise, and always in place, stores are ordinary.
enum class store_policy { automatic, streaming, cached };

/// Q or K. An operand with heads == 0 is absent (its pointers are ignored).
struct qk_tensor {
  const void* in = nullptr;
  void* out = nullptr;             // == in for in place
  std::int64_t heads = 0;
  std::int64_t size = 0;           // elements addressable from in (and out): the bounds check
  std::int64_t batch_stride = 0;   // padded layouts only; ignored with cu_seqlens
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
};

/// A float32 table of cos and sin for positions [first_position, max_position): the row of
/// position p is [attention_factor·cos(p·θ_i) for i < d/2, attention_factor·sin(p·θ_i) for
/// i < d/2], built with the exact phase, so it equals the on-the-fly table. Never lower precision.
/// A window that does not start at 0 serves a context-parallel shard or a decode window.
struct rotary_cache {
  int rotary_dim = 0;
  std::int64_t first_position = 0;
  std::int64_t max_position = 0;             // positions must lie in [first_position, max_position)
  double attention_factor = 1.0;
  std::vector<math::phase_t> turn_fractions;  // what it was built from (checked against the spec)
  std::vector<float> rows;                    // [max_position - first_position, rotary_dim]

  static rotary_cache build(const rotary_spec& spec, std::int64_t max_position,
                            std::int64_t first_position = 0);
};

/// Per-head RMSNorm of Q and K before the rotation (the QK-norm of Qwen3 and Gemma 3):
///   x ← x / sqrt(mean over the head's head_dim channels of x² + eps) · w
/// with w[c] = weight[c], or 1 + weight[c] with `unit_offset` (Gemma's convention). Float32
/// arithmetic; the output is rounded to the storage type once, after the rotation. Forward only.
struct qk_rms_norm {
  const float* q_weight = nullptr;  // [head_dim]; nullptr: Q is rotated without a norm
  const float* k_weight = nullptr;  // [head_dim]; nullptr: K is rotated without a norm
  float eps = 1e-6f;                // > 0 and finite
  bool unit_offset = false;
};

/// One tensor of a paged KV cache. Slot s of the cache (s = block·block_size + offset) holds a
/// token's heads; element (s, head h, channel c) lies at
///   block·block_stride + offset·slot_stride + h·head_stride + c.
/// NHD pages [blocks, block_size, heads, head_dim] and HND pages [blocks, heads, block_size,
/// head_dim] are two choices of strides; a flat [slots, heads, head_dim] cache is block_size 1.
struct paged_cache {
  void* data = nullptr;             // same storage type as Q and K
  std::int64_t size = 0;            // elements addressable from data: the bounds check
  std::int64_t block_stride = 0;
  std::int64_t slot_stride = 0;
  std::int64_t head_stride = 0;
};

/// The KV-cache write fused into rotate_qk (vLLM's reshape_and_cache, FlashInfer's append with
/// RoPE, ggml's ROPE + SET_ROWS): token t's rotated K heads go to slot slot_mapping[t] of `k`, and
/// its V heads, copied unchanged, to the same slot of `v`. A slot of −1 skips the token (padding).
/// Rotated K is also written to args.k.out unless that is null. Forward only.
struct kv_cache_write {
  const std::int64_t* slot_mapping = nullptr;  // [total_tokens], in [−1, blocks·block_size), no repeats
  std::int64_t blocks = 0;
  std::int64_t block_size = 0;
  paged_cache k;
  paged_cache v;                    // data == nullptr: V is not written
  qk_tensor values;                 // V: in, heads (= k.heads), size and strides as Q/K; out unused
};

/// The tokens of a call on Q and K: storage type, operands, layout, positions. What the fused
/// attention takes (attention_args::qk); rotate_qk's own call adds its extras (rotate_qk_args).
struct qk_args {
  dtype type = dtype::f32;
  qk_tensor q;
  qk_tensor k;
  std::int64_t batch = 1;
  std::int64_t seq_len = 0;                     // padded layouts
  const std::int64_t* cu_seqlens = nullptr;     // varlen: batch + 1 offsets, cu_seqlens[0] = 0
  const void* position_ids = nullptr;           // [num_axes, total_tokens]
  index_type position_type = index_type::i64;
  const std::int64_t* offsets = nullptr;        // [batch]; only without position_ids
  std::int64_t max_position = std::numeric_limits<std::int64_t>::max();  // positions must be below
  int threads = 0;                              // OpenMP threads; 0 = the OpenMP default
};

/// A rotation's call: the tokens, and what only a rotation writing Q and K out does.
struct rotate_qk_args : qk_args {
  const rotary_cache* cache = nullptr;          // cached cos/sin path when set, else on the fly
  store_policy stores = store_policy::automatic;
  const qk_rms_norm* qk_norm = nullptr;         // fused per-head RMSNorm before the rotation
  const kv_cache_write* kv_cache = nullptr;     // fused write of rotated K and of V into a cache
};

/// The same tokens as a plain rotation's call (no cache, no fused extras).
inline rotate_qk_args rotation_of(const qk_args& tokens) {
  rotate_qk_args r;
  static_cast<qk_args&>(r) = tokens;
  return r;
}

/// The position a frequency gradient's sum Σ_t m_t·c_t counts from. dL/dθ_i = Σ_t m_t·c_{t,i}
/// (c: dL/d(the token's angle)/θ_i) holds for any loss; when the loss is an attention, whose scores
/// depend only on differences of angles within a sequence, Σ_t c_{t,i} = 0 over each sequence, so
/// counting m from the sequence's first position gives the same value without the float rounding
/// of c times a large m (the fused attention's backward uses it).
enum class position_origin { zero, sequence_start };

}  // namespace grape::kernel
