#pragma once
// The arguments of the fused attention (cpu::attention, cpu/attention.hpp; cuda::attention,
// cuda/attention_cuda.hpp) and what it asks of an encoding instance: light enough for nvcc.
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "common/qk_args.hpp"
#include "grape/inject/compose.hpp"
#include "grape/inject/instance_kind.hpp"

namespace grape::kernel {

/// K and V on tokens of their own (a query chunk against another part of the sequence, new queries
/// against cached keys): their layout and positions; the batch is Q's. Sequence b's queries are
/// Q's sequence b, its keys these. causal then aligns the ends, as flash-attention does: query i of
/// q_len sees key j of k_len when j − (k_len − q_len) <= i (the queries are the keys' last
/// tokens), and a window counts in the same coordinates.
struct key_tokens {
  std::int64_t seq_len = 0;                  // padded layouts: the keys of each sequence
  const std::int64_t* cu_seqlens = nullptr;  // varlen: batch + 1 offsets of the keys' tokens
  const void* position_ids = nullptr;        // [num_axes, key tokens], of qk.position_type
  const std::int64_t* offsets = nullptr;     // [batch]; only without position_ids
};

struct attention_args {
  qk_args qk;              // Q and K (read from .in; .out unused), tokens, positions, storage type
  qk_tensor v;             // V (read from .in): the tokens of K, v.heads dividing Q's heads
  int v_dim = 0;           // channels of V and of the output (0: the encoding's head_dim)
  void* out = nullptr;     // [total_tokens, q_heads, v_dim], contiguous, in the storage type
  float* lse = nullptr;    // [q_heads, total_tokens]: log-sum-exp of each row's logits, or null
  bool causal = true;
  std::int64_t window = 0; // > 0: sliding window of this many keys (both sides when not causal)
  float scale = 0;         // 0: 1/sqrt(head_dim)
  const key_tokens* keys = nullptr;  // K and V on tokens of their own, or null: Q's tokens
};

struct attention_grad_args {
  const void* grad_out = nullptr;   // dL/dO: [total_tokens, q_heads, v_dim], contiguous, storage type
  void* grad_q = nullptr;           // dL/dQ: [total_tokens, q_heads, head_dim], contiguous, storage type
  void* grad_k = nullptr;           // dL/dK: [total_tokens, k_heads, head_dim]
  void* grad_v = nullptr;           // dL/dV: [total_tokens, v_heads, v_dim]
  double* grad_bias = nullptr;      // the score bias's parameter_count() values, or null
  double* grad_inv_freq = nullptr;  // rotation planes: rotary_dim / 2 values dL/dθ_i (phase rotation:
                                    // [freq_rows, planes]), or null
  double* grad_phases = nullptr;    // phase rotation: dL/dΦ [phase_rows, length], or null
};

/// Attention with no encoding (the baseline the encodings are measured against).
struct no_encoding {
  int head_dim = 0;
  int content_dim() const { return head_dim; }
};

}  // namespace grape::kernel

template <>
struct grape::instance_traits<grape::kernel::no_encoding> {
  static constexpr instance_kind kind = instance_kind::none;
};

namespace grape::kernel {

/// The bias object of an instance (a composed instance's bias part), or a null `const void*`.
template <class I>
const auto* bias_part(const I& inst) {
  if constexpr (has_score_bias<I>) return &score_bias_of(inst);
  else return static_cast<const void*>(nullptr);
}

/// A rotation by per-token real phases (rotate_by_phase: contextual GRAPE-M).
template <class Instance>
constexpr bool rotates_by_phase = is_phase_rotation<Instance>;

/// Instances cpu::attention applies inside the score: a rotation (or a composition with one, or a
/// rotation by per-token phases), a lift, a score bias, or no_encoding. An add_embedding encoding
/// acts on the input, before the projections, so it has no place here.
template <class Instance>
constexpr bool attention_takes = enters_attention<Instance>;

}  // namespace grape::kernel
