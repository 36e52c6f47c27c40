#pragma once
// A rotation by per-token real phases (contextual GRAPE-M, inject/rotate_by_phase.hpp) inside the
// fused attention: the instance's phases sit at positions (token indices into its phase
// sequence), the GRAPE-M kernel (cpu/grape_m.hpp) takes one phase per call token, so the call's
// phases are gathered at each token's position; θ and Φ keep their rows (shared, or one per head,
// which pairs Q and K heads one to one).
#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "cpu/grape_m.hpp"
#include "grape/detail/error.hpp"
#include "grape/inject/rotate_by_phase.hpp"

namespace grape::cpu::detail {

/// The GRAPE-M kernel's arguments for a call whose tokens sit at `positions` (one per call token).
struct phase_call {
  std::vector<double> phases;  // [phase_rows, total]
  grape_m_spec spec;
};

inline phase_call phase_call_of(const phase_rotation& r, const std::vector<std::int64_t>& positions,
                                std::int64_t q_heads, std::int64_t k_heads) {
  if (r.per_head() && (q_heads != r.num_heads || k_heads != r.num_heads))
    throw input_error(fmt::format("q.heads, k.heads: this phase rotation has a row per head, so both must be {} "
                                  "(got {} and {})",
                                  r.num_heads, q_heads, k_heads));
  phase_call c;
  const std::int64_t total = static_cast<std::int64_t>(positions.size());
  c.phases.resize(static_cast<std::size_t>(r.phase_rows * total));
  for (int row = 0; row < r.phase_rows; ++row)
    for (std::int64_t t = 0; t < total; ++t) c.phases[row * total + t] = r.phase(row, positions[t]);
  c.spec.head_dim = r.head_dim;
  c.spec.planes = r.planes();
  c.spec.layout = math::layout_kind::half_split;
  c.spec.freqs = r.freqs.data();
  c.spec.freq_rows = r.freq_rows;
  c.spec.phases = c.phases.data();
  c.spec.phase_rows = r.phase_rows;
  return c;
}

/// rotate_qk's arguments of a call without its positions: the kernel reads the gathered phases.
inline rotate_qk_args without_positions(rotate_qk_args a) {
  a.position_ids = nullptr;
  a.offsets = nullptr;
  return a;
}

}  // namespace grape::cpu::detail
