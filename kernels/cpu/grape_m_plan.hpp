#pragma once
// The checked plan of a GRAPE-M call (cpu/grape_m.hpp), shared by the CPU kernels and the CUDA
// host, which plans without reading device memory.
#include <cstdint>
#include <optional>

#include "cpu/grape_m.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape::cpu::detail {

/// rotate_qk's plan of the call's tokens, and its heads: key heads (the rows' unit) and query
/// heads per key head.
struct grape_m_plan {
  owned_plan owned;
  std::int64_t kv_heads = 0;
  std::int64_t group = 0;
};

/// Checks the spec against the call (grape::input_error naming the field) and plans its tokens.
/// With `device`, index arrays and phases are device memory: not read (the kernel checks them).
grape_m_plan plan_grape_m(const grape_m_spec& spec, const rotate_qk_args& args,
                          const device_indices* device = nullptr);

/// The spec as a rotary spec when it is one (one shared row of θ >= 0, integer positions): then
/// rotate_qk's own kernels take the call, by −angle through their backward. Call after checking.
std::optional<rotary_spec> grape_m_rotary_spec(const grape_m_spec& spec);

}  // namespace grape::cpu::detail
