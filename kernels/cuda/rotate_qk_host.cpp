// Host side of the CUDA rotate_qk (compiled by the host compiler): the CPU's plan and checks, made
// without reading device memory; device tables; the choice between 16-byte chunks and the scalar fallback.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "common/rotate_plan.hpp"
#include "cuda/errors.hpp"
#include "cuda/rotate_freq_grad_launch.hpp"
#include "cuda/rotate_qk_cuda.hpp"
#include "cuda/rotate_qk_call.hpp"
#include "cuda/stream_scratch.hpp"
#include "grape/detail/error.hpp"

namespace grape::cuda {
namespace {

/// The CPU's plan and checks over device pointers, with the device tables; the positions and
/// sequence lengths are device memory, so the kernel checks the positions (error flag) and the
/// host takes total_tokens from the caller.
kernel::rotate_plan device_plan(const rotary_spec& spec, const device_rotary& tables,
                                     const kernel::rotate_qk_args& args, std::int64_t total_tokens, float sin_sign) {
  const kernel::device_indices device{total_tokens};
  kernel::rotate_plan p = kernel::make_rotate_plan(spec, args, &device).plan;
  p.plane_axis = tables.plane_axis();
  p.turn_fractions = tables.turn_fractions();
  p.sin_sign = sin_sign;
  p.cache = tables.cache();
  p.cache_first = 0;
  p.stream_stores = false;
  return p;
}

void launch(const rotary_spec& spec, const device_rotary& tables, const kernel::rotate_qk_args& args,
            std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream, float sin_sign) {
  detail::check_device_call(args, device_error_flag);
  detail::rotate_call r;
  r.plan = device_plan(spec, tables, args, total_tokens, sin_sign);
  const auto& p = r.plan;
  r.cache_rows = tables.cache_positions();
  r.total_tokens = p.total_tokens;
  r.max_position = args.max_position;
  r.error_flag = device_error_flag;
  r.stream = stream;

  r.vectorized = detail::chunks_fit(spec, args);
  switch (args.type) {
    case kernel::dtype::f32: return detail::launch_f32(r);
    case kernel::dtype::f16: return detail::launch_f16(r);
    case kernel::dtype::bf16: return detail::launch_bf16(r);
  }
}

}  // namespace

void detail::check_device_call(const kernel::rotate_qk_args& args, const int* device_error_flag) {
  if (args.cache != nullptr) throw input_error("cache: pass the device cache through device_rotary, not args.cache");
  if (args.qk_norm != nullptr || args.kv_cache != nullptr)
    throw input_error("qk_norm, kv_cache: the fused QK-norm and KV-cache write are CPU-only so far; pass null");
  if (device_error_flag == nullptr) throw input_error("device_error_flag: must not be null");
}

device_rotary::device_rotary(const rotary_spec& spec, std::int64_t cache_positions) {
  check_rotary_spec(spec);
  if (cache_positions < 0) throw input_error(fmt::format("cache_positions: must be >= 0 (got {})", cache_positions));
  turn_fractions_ = arrays_.copy(kernel::turn_fractions_of(spec.inv_freq), "the turn fractions");
  plane_axis_ = arrays_.copy(spec.plane_axis, "the plane axes");
  if (cache_positions > 0) {
    const auto host = kernel::rotary_cache::build(spec, cache_positions);  // the CPU's rows, exact phase
    cache_ = arrays_.copy(host.rows, "the cos/sin cache");
    cache_positions_ = cache_positions;
  }
}

void rotate_qk(const rotary_spec& spec, const device_rotary& tables, const kernel::rotate_qk_args& args,
               std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream) {
  launch(spec, tables, args, total_tokens, device_error_flag, stream, 1.0f);
}

void rotate_qk_backward(const rotary_spec& spec, const device_rotary& tables, const kernel::rotate_qk_args& args,
                        std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream) {
  launch(spec, tables, args, total_tokens, device_error_flag, stream, -1.0f);  // R(φ)ᵀ = R(−φ)
}

void rotate_qk_inv_freq_grad(const rotary_spec& spec, const device_rotary& tables, const kernel::rotate_qk_args& forward,
                             const kernel::rotate_qk_args& grads, double* grad_inv_freq, std::int64_t total_tokens,
                             int* device_error_flag, cudaStream_t stream, kernel::position_origin origin) {
  detail::check_device_call(forward, device_error_flag);
  detail::check_device_call(grads, device_error_flag);
  if (grad_inv_freq == nullptr) throw input_error("grad_inv_freq: must not be null");
  if (grads.q.heads != forward.q.heads || grads.k.heads != forward.k.heads)
    throw input_error(fmt::format("grads: must have the forward's heads (q {}, k {}; got q {}, k {})", forward.q.heads,
                                  forward.k.heads, grads.q.heads, grads.k.heads));
  // Both validated as the CPU validates them, with out = in (only in is read).
  const auto read_only = [](kernel::rotate_qk_args a) {
    a.q.out = const_cast<void*>(a.q.in);
    a.k.out = const_cast<void*>(a.k.in);
    return a;
  };
  freq_grad_call c;
  c.p = device_plan(spec, tables, read_only(forward), total_tokens, 1.0f);
  const kernel::rotate_plan g = device_plan(spec, tables, read_only(grads), total_tokens, 1.0f);
  c.gq = g.q;
  c.gk = g.k;
  c.max_position = forward.max_position;
  c.cache_rows = tables.cache_positions();
  c.error_flag = device_error_flag;
  c.origin = origin;
  const std::int64_t tokens = c.p.total_tokens;
  const std::size_t bytes = static_cast<std::size_t>(tokens) * (spec.rotary_dim / 2) * sizeof(double);
  const detail::stream_scratch partial(bytes, stream);
  c.partial = static_cast<double*>(partial.get());
  detail::launch_freq_grad(c, forward.type, tokens, grad_inv_freq, stream);
}

}  // namespace grape::cuda
