// Host side of the CUDA rotate_qk (compiled by the host compiler): the CPU's plan and checks, made
// without reading device memory; device tables; the choice between 16-byte chunks and the scalar fallback.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "cpu/rotate_qk_plan.hpp"
#include "cuda/rotate_qk_cuda.hpp"
#include "cuda/rotate_qk_request.hpp"
#include "grape/detail/error.hpp"

namespace grape::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("grape: {}: {}", what, cudaGetErrorString(e)));
}

void launch(const rotary_spec& spec, const device_rotary& tables, const cpu::rotate_qk_args& args,
            std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream, float sin_sign) {
  detail::check_device_call(args, device_error_flag);
  // The CPU's plan and checks; the positions and sequence lengths are device memory, so the
  // kernel checks the positions (error flag) and the host takes total_tokens from the caller.
  const cpu::detail::device_indices device{total_tokens};
  detail::launch_request r;
  r.plan = cpu::detail::make_rotate_plan(spec, args, &device).plan;
  auto& p = r.plan;
  p.plane_axis = tables.plane_axis();
  p.turn_fractions = tables.turn_fractions();
  p.sin_sign = sin_sign;
  p.cache = tables.cache();
  p.cache_first = 0;
  p.stream_stores = false;
  r.cache_rows = tables.cache_positions();
  r.total_tokens = p.total_tokens;
  r.max_position = args.max_position;
  r.error_flag = device_error_flag;
  r.stream = stream;

  r.vectorized = detail::chunks_fit(spec, args);
  switch (args.type) {
    case cpu::dtype::f32: return detail::launch_f32(r);
    case cpu::dtype::f16: return detail::launch_f16(r);
    case cpu::dtype::bf16: return detail::launch_bf16(r);
  }
}

}  // namespace

void detail::check_device_call(const cpu::rotate_qk_args& args, const int* device_error_flag) {
  if (args.cache != nullptr) throw input_error("cache: pass the device cache through device_rotary, not args.cache");
  if (args.qk_norm != nullptr || args.kv_cache != nullptr)
    throw input_error("qk_norm, kv_cache: the fused QK-norm and KV-cache write are CPU-only so far; pass null");
  if (device_error_flag == nullptr) throw input_error("device_error_flag: must not be null");
}

device_rotary::device_rotary(const rotary_spec& spec, std::int64_t cache_positions) {
  check_rotary_spec(spec);
  if (cache_positions < 0) throw input_error(fmt::format("cache_positions: must be >= 0 (got {})", cache_positions));
  const std::vector<math::phase_t> turns = cpu::detail::turn_fractions_of(spec.inv_freq);
  check(cudaMalloc(&turn_fractions_, turns.size() * sizeof(math::phase_t)), "cudaMalloc");
  check(cudaMemcpy(turn_fractions_, turns.data(), turns.size() * sizeof(math::phase_t), cudaMemcpyHostToDevice), "cudaMemcpy");
  if (!spec.plane_axis.empty()) {
    check(cudaMalloc(&plane_axis_, spec.plane_axis.size() * sizeof(int)), "cudaMalloc");
    check(cudaMemcpy(plane_axis_, spec.plane_axis.data(), spec.plane_axis.size() * sizeof(int), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  if (cache_positions > 0) {
    const auto host = cpu::rotary_cache::build(spec, cache_positions);  // the CPU's rows, exact phase
    check(cudaMalloc(&cache_, host.rows.size() * sizeof(float)), "cudaMalloc");
    check(cudaMemcpy(cache_, host.rows.data(), host.rows.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    cache_positions_ = cache_positions;
  }
}

device_rotary::~device_rotary() {
  cudaFree(turn_fractions_);
  cudaFree(plane_axis_);
  cudaFree(cache_);
}

void rotate_qk(const rotary_spec& spec, const device_rotary& tables, const cpu::rotate_qk_args& args,
               std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream) {
  launch(spec, tables, args, total_tokens, device_error_flag, stream, 1.0f);
}

void rotate_qk_backward(const rotary_spec& spec, const device_rotary& tables, const cpu::rotate_qk_args& args,
                        std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream) {
  launch(spec, tables, args, total_tokens, device_error_flag, stream, -1.0f);  // R(φ)ᵀ = R(−φ)
}

}  // namespace grape::cuda
