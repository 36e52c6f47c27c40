#pragma once
// A validated rotate_qk call: plain pointers, sizes and strides, ready for the per-token body.
// Built on the host by make_rotate_plan (all argument checks live there); the per-token body
// trusts it. Holds no Eigen or std::vector so the same body can run in a CUDA kernel.
#include <cstdint>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"

namespace grape::cpu::detail {

struct qk_operand {
  const void* in = nullptr;
  void* out = nullptr;
  std::int64_t heads = 0;
  std::int64_t batch_stride = 0;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
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
};

/// Host-side storage the plan points into (turn fractions) plus the plan itself.
struct owned_plan {
  std::vector<math::phase_t> turn_fractions;
  std::vector<int> plane_axis;
  rotate_plan plan;
};

/// Checks every argument (throws grape::input_error naming it) and resolves the plan.
owned_plan make_rotate_plan(const rotary_spec& spec, const rotate_qk_args& args);

/// Turn fractions of the spec's inverse frequencies (validated: finite).
std::vector<math::phase_t> turn_fractions_of(const rotary_spec& spec);

/// Runs the plan; one instantiation set per storage type (rotate_qk_f32.cpp, ...).
void run_rotate_f32(const rotate_plan& plan);
void run_rotate_f16(const rotate_plan& plan);
void run_rotate_bf16(const rotate_plan& plan);

}  // namespace grape::cpu::detail
