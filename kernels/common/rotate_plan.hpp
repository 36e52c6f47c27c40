#pragma once
// A validated rotate_qk call: plain pointers, sizes and strides, ready for the per-token body.
// Built on the host by make_rotate_plan (all argument checks live there); the per-token body
// trusts it. Holds no Eigen or std::vector so the same body can run in a CUDA kernel.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/qk_args.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/schedule/spec_check.hpp"

namespace grape::kernel {

struct qk_operand {
  const void* in = nullptr;
  void* out = nullptr;
  std::int64_t heads = 0;
  std::int64_t batch_stride = 0;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
};

/// A paged cache resolved by the plan: element (slot, head, channel) at
/// (slot / block_size)·block_stride + (slot % block_size)·slot_stride + head·head_stride + channel.
struct cache_operand {
  void* data = nullptr;
  std::int64_t block_stride = 0;
  std::int64_t slot_stride = 0;
  std::int64_t head_stride = 0;
};

/// The fused extras of a call (rotate_qk_fused_item.hpp); all null in a plain rotation.
struct fused_plan {
  const float* q_norm = nullptr;              // RMSNorm multipliers [head_dim] (1 + w baked in)
  const float* k_norm = nullptr;
  float norm_eps = 0.0f;
  bool write_cache = false;                   // K (and V) are written to the caches
  const std::int64_t* slots = nullptr;        // [total_tokens] with write_cache
  std::int64_t block_size = 1;
  cache_operand k_cache, v_cache;             // v_cache.data == nullptr: V is not written
  qk_operand v;                               // V's input (out unused)
  bool active() const { return q_norm != nullptr || k_norm != nullptr || write_cache; }
};

struct rotate_plan {
  qk_operand q, k;
  int head_dim = 0;
  int rotary_dim = 0;
  math::layout_kind layout = math::layout_kind::half_split;
  std::int64_t batch = 1;
  std::int64_t seq_len = 0;
  const std::int64_t* cu_seqlens = nullptr;
  std::int64_t total_tokens = 0;
  const void* position_ids = nullptr;
  index_type position_type = index_type::i64;
  const std::int64_t* offsets = nullptr;
  int num_axes = 1;
  const int* plane_axis = nullptr;            // nullptr: every plane follows axis 0
  const math::phase_t* turn_fractions = nullptr;
  float attention_factor = 1.0f;
  float sin_sign = 1.0f;                      // −1: rotate by −angle (backward)
  const float* cache = nullptr;               // rows of rotary_dim floats, or nullptr
  std::int64_t cache_first = 0;               // position of the cache's first row
  int threads = 0;
  bool stream_stores = false;                 // out of place, aligned: non-temporal stores
  fused_plan fused;                           // QK-norm, KV-cache write
};

/// Host-side storage the plan points into (turn fractions) plus the plan itself.
struct owned_plan {
  std::vector<math::phase_t> turn_fractions;
  std::vector<int> plane_axis;
  std::vector<float> q_norm, k_norm;
  rotate_plan plan;
};

using grape::encoding_shape;  // grape/schedule/spec_check.hpp: the one check of what is encoded

/// Set when the call's index arrays (cu_seqlens, position_ids, offsets) are in device memory:
/// the host cannot read them, so it takes the token count from the caller, skips the checks that
/// read them, and the kernel checks every position itself (the CUDA kernels' error flag).
struct device_indices {
  std::int64_t total_tokens = 0;  // tokens of the call; used with cu_seqlens
};

/// Checks every argument (throws grape::input_error naming it) and resolves the plan of a
/// rotation-plane call (the specialised kernels: turn fractions, optional cos/sin cache).
owned_plan make_rotate_plan(const rotary_spec& spec, const rotate_qk_args& args,
                            const device_indices* device = nullptr);

/// Backward calls take no fused extras (qk_norm, kv_cache are forward-only).
void require_forward_extras_absent(const rotate_qk_args& args);

/// The same checks and plan for any representation (encode_qk.hpp): no frequencies, no cache,
/// ordinary stores.
owned_plan make_instance_plan(const encoding_shape& shape, const rotate_qk_args& args,
                              const device_indices* device = nullptr);

struct extent_stride {
  std::int64_t extent;
  std::int64_t stride;
};

/// Elements spanned by `inner` contiguous channels repeated over `dims` (any order), after
/// checking that no two entries of the view share an element (else throws, naming `name` and
/// the `entries` that would overlap).
std::int64_t distinct_span(const std::string& name, const char* entries,
                           std::array<extent_stride, 4> dims, int count, std::int64_t inner);

/// Checks one Q/K/V operand against the plan's tokens (strides, size, in/out overlap) and returns
/// the elements it spans (0 when it has no heads or there are no tokens). `out_optional`: a null
/// `out` is allowed (K written only to a KV cache).
std::int64_t check_operand(const std::string& name, const qk_tensor& t, const rotate_plan& p,
                           std::int64_t max_seq, dtype type, bool out_optional = false);

/// The elements Q and K span (check_operand's results), for the cache overlap checks.
struct operand_spans {
  std::int64_t q, k;
};

/// Checks args.qk_norm and args.kv_cache (rotate_fused_plan.cpp) and fills plan.fused; Q and
/// K themselves are already checked (their spans given).
void plan_fused(const rotate_qk_args& args, std::int64_t max_seq, operand_spans spans,
                owned_plan& o);

/// Turn fractions of inverse frequencies (finite and non-negative: check_rotary_spec's rule).
std::vector<math::phase_t> turn_fractions_of(const std::vector<double>& inv_freq);

}  // namespace grape::kernel
