#pragma once
// The checked plan of a GRAPE-M call (cpu/grape_m.hpp), shared by the CPU kernels and the CUDA
// host, which plans without reading device memory.
#include <cstdint>
#include <optional>
#include <vector>

#include "common/grape_m_args.hpp"
#include "common/rotate_plan.hpp"
#include "grape/math/phase.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape::kernel {

/// The call's heads as the spec's rows count them: key heads (the rows' unit) and query heads per
/// key head.
struct grape_m_heads {
  std::int64_t kv_heads = 0;
  std::int64_t group = 0;
};

/// rotate_qk's plan of the call's tokens, and its heads.
struct grape_m_plan {
  owned_plan owned;
  std::int64_t kv_heads = 0;
  std::int64_t group = 0;
};

/// Checks the spec against the call (grape::input_error naming the field), without planning.
grape_m_heads check_grape_m(const grape_m_spec& spec, const rotate_qk_args& args);

/// Plans the call's tokens once check_grape_m has checked the spec and given its heads. With
/// `device`, index arrays and phases are device memory: not read (the kernel checks them).
grape_m_plan plan_grape_m(const grape_m_spec& spec, const grape_m_heads& heads, const rotate_qk_args& args,
                          const device_indices* device = nullptr);

/// check_grape_m, then the plan.
grape_m_plan plan_grape_m(const grape_m_spec& spec, const rotate_qk_args& args,
                          const device_indices* device = nullptr);

/// The arguments of a parameter-gradient call (grape_m_param_grads, CPU or CUDA): the forward's,
/// with the gradients addressed like the inputs (out = in, so the plan checks them alike), after
/// checking that each side's gradient and a phase gradient's phases are given.
rotate_qk_args grads_call_args(const grape_m_spec& spec, const rotate_qk_args& forward, const void* grad_q,
                               const void* grad_k, const grape_m_grads& out);

/// The arguments of a backward-with-gradients call (grape_m_rotate_qk_backward_with_grads): the
/// backward's, after checking that each side's rotated operand is given and that a phase
/// gradient has phases.
rotate_qk_args backward_grads_call_args(const grape_m_spec& spec, const rotate_qk_args& backward,
                                        const void* rotated_q, const void* rotated_k, const grape_m_grads& out);

/// θ of every row and plane as the kernels turn by it: exact turn fractions (integer positions:
/// the phase of m is m·f mod 2^64, as rotate_qk's) and θ/2π in float64 (real phases, for
/// math::phase_of_turns). Shared by the CPU kernel and the CUDA host; a non-finite θ throws.
struct grape_m_turns {
  std::vector<math::phase_t> fractions;
  std::vector<double> turns;
};
grape_m_turns turns_of(const grape_m_spec& spec);

/// The spec as a rotary spec when it is one (one shared row of θ >= 0, integer positions): then
/// rotate_qk's own kernels take the call, by −angle through their backward. Call after checking.
std::optional<rotary_spec> grape_m_rotary_spec(const grape_m_spec& spec);

}  // namespace grape::kernel
