#pragma once
// A rotation by per-token real phases (contextual GRAPE-M, inject/rotate_by_phase.hpp) as both
// backends' fused attention hands it to their GRAPE-M kernels: the heads it pairs, the kernel's
// spec, and the call's tokens without positions (the kernel reads the gathered phases instead).
#include <fmt/format.h>

#include <cstdint>

#include "common/grape_m_args.hpp"
#include "common/qk_args.hpp"
#include "grape/detail/error.hpp"
#include "grape/inject/rotate_by_phase.hpp"

namespace grape::kernel {

/// A row of θ or Φ per head pairs Q and K heads one to one (no GQA).
inline void check_phase_heads(const phase_rotation& r, std::int64_t q_heads, std::int64_t k_heads) {
  if (r.per_head() && (q_heads != r.num_heads || k_heads != r.num_heads))
    throw input_error(fmt::format("q.heads, k.heads: this phase rotation has a row per head, so both must be {} "
                                  "(got {} and {})",
                                  r.num_heads, q_heads, k_heads));
}

/// The GRAPE-M kernel's spec for the rotation (its phases, null here, come with each call).
inline grape_m_spec grape_m_spec_of(const phase_rotation& r) {
  grape_m_spec spec;
  spec.head_dim = r.head_dim;
  spec.planes = r.planes();
  spec.layout = math::layout_kind::half_split;
  spec.freqs = r.freqs.data();
  spec.freq_rows = r.freq_rows;
  spec.phase_rows = r.phase_rows;
  return spec;
}

/// rotate_qk's arguments of a call without its positions: the kernel reads the gathered phases.
inline rotate_qk_args without_positions(const qk_args& tokens) {
  rotate_qk_args a = rotation_of(tokens);
  a.position_ids = nullptr;
  a.offsets = nullptr;
  return a;
}

}  // namespace grape::kernel
