#pragma once
// A rotation by per-token real phases (contextual GRAPE-M, inject/rotate_by_phase.hpp) inside the
// fused attention: the instance's phases sit at positions (token indices into its phase
// sequence), the GRAPE-M kernel (cpu/grape_m.hpp) takes one phase per call token, so the call's
// phases are gathered at each token's position; θ and Φ keep their rows (shared, or one per head,
// which pairs Q and K heads one to one).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/phase_rotation.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/grape_m.hpp"
#include "grape/detail/error.hpp"
#include "grape/inject/rotate_by_phase.hpp"

namespace grape::cpu::detail {

/// The GRAPE-M kernel's arguments for a call whose tokens sit at `positions` (one per call token).
struct phase_call {
  std::vector<std::int64_t> positions;  // [total]: the token each call token reads
  std::vector<double> phases;           // [phase_rows, total]
  grape_m_spec spec;
};

inline phase_call phase_call_of(const phase_rotation& r, const std::vector<std::int64_t>& positions,
                                std::int64_t q_heads, std::int64_t k_heads) {
  check_phase_heads(r, q_heads, k_heads);
  phase_call c;
  c.positions = positions;
  const std::int64_t total = static_cast<std::int64_t>(positions.size());
  c.phases.resize(static_cast<std::size_t>(r.phase_rows * total));
  for (int row = 0; row < r.phase_rows; ++row)
    for (std::int64_t t = 0; t < total; ++t) c.phases[row * total + t] = r.phase(row, positions[t]);
  c.spec = grape_m_spec_of(r);
  c.spec.phases = c.phases.data();
  return c;
}

/// The rotation's backward on the call's gradients dq, dk (float32, `rotated`'s strides; turned
/// back in place), with dL/dθ [freq_rows, planes] and dL/dΦ [phase_rows, r.length] when asked for
/// (either may be null; overwritten) from the rotated Q and K in `rotated`: the GRAPE-M kernel's
/// one pass (grape_m_rotate_qk_backward_with_grads), dL/dθ with each sequence's first phase as its
/// origin (grape_m_grads says why), and each token's dL/dΦ added to the phase its token read. The
/// sequences start at the tokens `first`.
inline void phase_backward(const phase_rotation& r, const phase_call& c, const std::vector<std::int64_t>& first,
                           const rotate_qk_args& rotated, float* dq, float* dk, double* grad_freqs,
                           double* grad_phases) {
  rotate_qk_args back = rotated;
  back.q.in = back.q.out = dq;
  back.k.in = back.k.out = dk;
  if (!grad_freqs && !grad_phases) return grape_m_rotate_qk_backward(c.spec, back);
  const std::int64_t total = static_cast<std::int64_t>(c.positions.size());
  std::vector<double> per_token(grad_phases ? static_cast<std::size_t>(r.phase_rows * total) : 0);
  std::vector<double> origin(c.phases.size());
  for (std::size_t b = 0; b < first.size(); ++b) {
    const std::int64_t end = b + 1 < first.size() ? first[b + 1] : total;
    for (int row = 0; row < r.phase_rows; ++row)
      for (std::int64_t t = first[b]; t < end; ++t) origin[row * total + t] = c.phases[row * total + first[b]];
  }
  grape_m_spec spec = c.spec;
  spec.phase_origin = origin.data();
  grape_m_rotate_qk_backward_with_grads(spec, back, rotated.q.in, rotated.k.in,
                                        {grad_freqs, grad_phases ? per_token.data() : nullptr});
  if (!grad_phases) return;
  std::fill_n(grad_phases, r.phase_rows * r.length, 0.0);
  for (int row = 0; row < r.phase_rows; ++row)
    for (std::int64_t t = 0; t < total; ++t) grad_phases[row * r.length + c.positions[t]] += per_token[row * total + t];
}

}  // namespace grape::cpu::detail
