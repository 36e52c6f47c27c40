// Host side of the CUDA GRAPE-M (compiled by the host compiler): the frequency tables in device
// memory, the rotate_qk route for one shared row of θ >= 0, the plan and the launch.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "common/rotate_plan.hpp"
#include "cuda/errors.hpp"
#include "cuda/grape_m_call.hpp"
#include "cuda/grape_m_cuda.hpp"
#include "cuda/rotate_qk_call.hpp"
#include "grape/detail/error.hpp"

namespace grape::cuda {
namespace {

void run(const device_grape_m& m, const kernel::rotate_qk_args& args, device_phases phases, std::int64_t total_tokens,
         int* device_error_flag, cudaStream_t stream, bool backward) {
  detail::check_device_call(args, device_error_flag);
  kernel::grape_m_spec spec = m.spec();
  spec.phases = phases.values;
  spec.phase_rows = phases.rows;
  spec.phase_origin = phases.values ? phases.origin : nullptr;
  if (phases.values == nullptr && m.rotary() != nullptr) {  // rotate_qk's kernel; −angle is its backward
    const kernel::device_indices device{total_tokens};
    kernel::plan_grape_m(spec, args, &device);  // the CPU call's checks and messages
    const bool reverse = backward != (spec.angle_sign < 0);
    return reverse ? rotate_qk_backward(*m.rotary(), *m.rotary_tables(), args, total_tokens, device_error_flag, stream)
                   : rotate_qk(*m.rotary(), *m.rotary_tables(), args, total_tokens, device_error_flag, stream);
  }
  const grape_m_launch l = plan_grape_m_launch(spec, {m.turn_fractions(), m.turns()}, args, total_tokens,
                                               device_error_flag, backward);
  detail::launch_grape_m(l, args.type, spec.layout, stream);
}

}  // namespace

device_grape_m::device_grape_m(const kernel::grape_m_spec& spec) : spec_(spec) {
  if (spec.phases != nullptr) throw input_error("grape_m: phases: pass them with each call, not in the device spec");
  if (spec.freqs == nullptr) throw input_error("grape_m: freqs is null");
  if (spec.freq_rows < 1) throw input_error(fmt::format("grape_m: freqs: rows must be >= 1 (got {})", spec.freq_rows));
  if (spec.planes <= 0 || 2 * spec.planes > spec.head_dim)
    throw input_error(
        fmt::format("grape_m: planes must be in [1, head_dim / 2 = {}] (got {})", spec.head_dim / 2, spec.planes));
  const std::size_t count = static_cast<std::size_t>(spec.freq_rows) * spec.planes;
  freqs_.assign(spec.freqs, spec.freqs + count);
  spec_.freqs = freqs_.data();
  const grape_m_host_tables tables = host_tables_of(spec_);
  rotary_ = kernel::grape_m_rotary_spec(spec_);
  fractions_ = arrays_.copy(tables.fractions, "GRAPE-M's turn fractions");
  turns_ = arrays_.copy(tables.turns, "GRAPE-M's turns");
  thetas_ = arrays_.copy(tables.thetas, "GRAPE-M's frequencies");
  if (rotary_) rotary_tables_ = std::make_unique<device_rotary>(*rotary_);
}

void grape_m_rotate_qk(const device_grape_m& m, const kernel::rotate_qk_args& args, device_phases phases,
                       std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream) {
  run(m, args, phases, total_tokens, device_error_flag, stream, false);
}

void grape_m_rotate_qk_backward(const device_grape_m& m, const kernel::rotate_qk_args& args, device_phases phases,
                                std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream) {
  run(m, args, phases, total_tokens, device_error_flag, stream, true);
}

void grape_m_param_grads(const device_grape_m& m, const kernel::rotate_qk_args& forward, device_phases phases,
                         const void* grad_q, const void* grad_k, kernel::grape_m_grads out, std::int64_t total_tokens,
                         int* device_error_flag, cudaStream_t stream) {
  detail::check_device_call(forward, device_error_flag);
  kernel::grape_m_spec spec = m.spec();
  spec.phases = phases.values;
  spec.phase_rows = phases.rows;
  spec.phase_origin = phases.values ? phases.origin : nullptr;
  const grape_m_grads_launch l = plan_grape_m_grads_launch(spec, {m.turn_fractions(), m.turns()}, m.thetas(), forward,
                                                           grad_q, grad_k, out, total_tokens, device_error_flag);
  if (out.freqs != nullptr)
    detail::check_cuda(
        cudaMemsetAsync(out.freqs, 0, static_cast<std::size_t>(spec.freq_rows) * spec.planes * sizeof(double), stream),
        "cudaMemsetAsync");
  if (out.phases != nullptr)
    detail::check_cuda(cudaMemsetAsync(out.phases, 0,
                                       static_cast<std::size_t>(spec.phase_rows) * l.call.c.p.total_tokens * sizeof(double),
                                       stream),
                       "cudaMemsetAsync");
  detail::launch_grape_m_grads(l, forward.type, spec.layout, stream);
}

}  // namespace grape::cuda
