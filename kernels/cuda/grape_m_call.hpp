#pragma once
// A GRAPE-M call as the device runs it (grape_m_call, cuda/grape_m_thread.hpp), planned on the
// host: the CPU's checks and plan without reading device memory, the block size and whether the
// token's cos/sin table fits in shared memory. Plain C++: the CUDA host and the emulation test
// (tests/cuda_emulation) build the same call. C++17, as the library's .cu files.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/grape_m_plan.hpp"
#include "cuda/grape_m_grads_thread.hpp"
#include "cuda/grape_m_thread.hpp"
#include "grape/detail/error.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda {

/// θ in the two forms the body reads: turn fractions (integer positions) and θ/2π (phases).
struct grape_m_tables {
  const math::phase_t* fractions = nullptr;
  const double* turns = nullptr;
};

/// The same tables in host memory, from the spec's θ (validated: finite), for upload; with θ
/// itself, which the gradient with respect to Φ reads.
struct grape_m_host_tables {
  std::vector<math::phase_t> fractions;
  std::vector<double> turns;
  std::vector<double> thetas;
};
inline grape_m_host_tables host_tables_of(const kernel::grape_m_spec& spec) {
  kernel::grape_m_turns turns = kernel::turns_of(spec);
  const std::size_t count = static_cast<std::size_t>(spec.freq_rows) * spec.planes;
  return {std::move(turns.fractions), std::move(turns.turns), std::vector<double>(spec.freqs, spec.freqs + count)};
}

/// The call and its launch shape: one block of `block` threads per token.
struct grape_m_launch {
  grape_m_call call;
  int block = 1;
  std::int64_t shared_bytes() const { return call.table_floats() * static_cast<std::int64_t>(sizeof(float)); }
};

/// Plans the call: spec.freqs is host memory, spec.phases and every index array of args device
/// memory (not read: the kernel flags bad positions and non-finite phases).
inline grape_m_launch plan_grape_m_launch(const kernel::grape_m_spec& spec, grape_m_tables tables,
                                          const kernel::rotate_qk_args& args, std::int64_t total_tokens,
                                          int* error_flag, bool backward) {
  constexpr std::int64_t shared_budget_floats = 48 * 1024 / sizeof(float);
  const kernel::device_indices device{total_tokens};
  const kernel::grape_m_plan planned = kernel::plan_grape_m(spec, args, &device);
  grape_m_launch l;
  grape_m_call& c = l.call;
  c.p = planned.owned.plan;  // no pointer into the owned arrays: GRAPE-M's plan has no tables
  c.group = planned.group;
  c.planes = spec.planes;
  c.freq_rows = spec.freq_rows;
  c.phase_rows = spec.phase_rows;
  c.table_rows = spec.freq_rows > 1 || (spec.phases != nullptr && spec.phase_rows > 1)
                     ? static_cast<int>(planned.kv_heads) : 1;
  c.table = 2 * static_cast<std::int64_t>(c.table_rows) * c.planes <= shared_budget_floats;
  c.fractions = tables.fractions;
  c.turns = tables.turns;
  c.phases = spec.phases;
  c.phase_origin = spec.phase_origin;
  c.sin_sign = static_cast<float>(backward ? -spec.angle_sign : spec.angle_sign);
  c.max_position = args.max_position;
  c.error_flag = error_flag;
  const std::int64_t units = (c.p.q.heads + c.p.k.heads) * c.units_per_head();
  l.block = units >= 256 ? 256 : static_cast<int>((units + 31) / 32 * 32);
  return l;
}

/// The gradient launch of a forward call (spec and args as cpu::grape_m_param_grads takes them,
/// device pointers; the outputs as device memory the host zeroes first), on the forward's plan.
struct grape_m_grads_launch {
  grape_m_grads_call call;
  int block = 1;
  std::int64_t shared_bytes() const { return call.c.table_floats() * static_cast<std::int64_t>(sizeof(float)); }
};
inline grape_m_grads_launch plan_grape_m_grads_launch(const kernel::grape_m_spec& spec, grape_m_tables tables,
                                                      const double* thetas, const kernel::rotate_qk_args& forward,
                                                      const void* grad_q, const void* grad_k, kernel::grape_m_grads out,
                                                      std::int64_t total_tokens, int* error_flag) {
  const kernel::rotate_qk_args args = kernel::grads_call_args(spec, forward, grad_q, grad_k, out);
  const grape_m_launch l = plan_grape_m_launch(spec, tables, args, total_tokens, error_flag, false);
  return {{l.call, grad_q, grad_k, thetas, out.freqs, out.phases}, l.block};
}

namespace detail {
/// Launches the body for the call's dtype and layout (grape_m.cu).
void launch_grape_m(const grape_m_launch& l, kernel::dtype type, math::layout_kind layout, cudaStream_t stream);
void launch_grape_m_grads(const grape_m_grads_launch& l, kernel::dtype type, math::layout_kind layout,
                          cudaStream_t stream);
}  // namespace detail

}  // namespace grape::cuda
