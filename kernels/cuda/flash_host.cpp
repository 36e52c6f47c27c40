// Host side of the CUDA flash attention: the checks (flash_checks.hpp), the tile plan for the
// device's shared memory, and the dispatch on the storage type to the per-dtype launches
// (flash_*.cu).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <stdexcept>
#include <type_traits>

#include "cuda/attention_cuda.hpp"
#include "cuda/flash_launch.hpp"

namespace grape::cuda {

std::int64_t detail::shared_memory_limit() {
  int device = 0, limit = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    throw std::runtime_error("grape: cannot read the device's shared memory per block");
  return limit;
}

namespace {

template <class Bias>
void launch(const flash_operands& ops, const Bias& bias, cudaStream_t stream) {
  check_flash(ops);
  check_flash_bias(ops, bias);
  if (ops.tokens == 0 || ops.seq_len == 0) return;
  const flash_plan plan = plan_flash(ops, detail::shared_memory_limit());
  detail::require(plan.rows > 0, fmt::format("head_dim {}, v_dim {}: no tile fits the device's shared memory",
                                             ops.head_dim, ops.v_dim));
  if constexpr (std::is_same_v<Bias, fox_scores> || std::is_same_v<Bias, gated_scores>)
    if (ops.positions) detail::launch_position_check(ops.positions, ops.tokens, bias.length, ops.error, stream);
  switch (ops.type) {
    case cpu::dtype::f32: return detail::launch_flash_f32(ops, plan, bias, stream);
    case cpu::dtype::f16: return detail::launch_flash_f16(ops, plan, bias, stream);
    case cpu::dtype::bf16: return detail::launch_flash_bf16(ops, plan, bias, stream);
  }
}

template <class Bias>
void launch_backward(const flash_operands& ops, const flash_grads& g, const Bias& bias, cudaStream_t stream) {
  check_flash_backward(ops, g);
  check_flash_bias(ops, bias);
  if (ops.tokens == 0 || ops.seq_len == 0) return;
  const flash_plan plan = plan_flash_backward(ops, detail::shared_memory_limit());
  detail::require(plan.rows > 0, fmt::format("head_dim {}, v_dim {}: no backward tile fits the device's shared memory",
                                             ops.head_dim, ops.v_dim));
  if constexpr (std::is_same_v<Bias, fox_scores> || std::is_same_v<Bias, gated_scores>)
    if (ops.positions) detail::launch_position_check(ops.positions, ops.tokens, bias.length, ops.error, stream);
  switch (ops.type) {
    case cpu::dtype::f32: return detail::launch_flash_backward_f32(ops, g, plan, bias, stream);
    case cpu::dtype::f16: return detail::launch_flash_backward_f16(ops, g, plan, bias, stream);
    case cpu::dtype::bf16: return detail::launch_flash_backward_bf16(ops, g, plan, bias, stream);
  }
}

}  // namespace

void flash_attention(const flash_operands& ops, const no_scores& bias, cudaStream_t stream) {
  launch(ops, bias, stream);
}
void flash_attention(const flash_operands& ops, const alibi_scores& bias, cudaStream_t stream) {
  launch(ops, bias, stream);
}
void flash_attention(const flash_operands& ops, const t5_scores& bias, cudaStream_t stream) {
  launch(ops, bias, stream);
}
void flash_attention(const flash_operands& ops, const fox_scores& bias, cudaStream_t stream) {
  launch(ops, bias, stream);
}
void flash_attention(const flash_operands& ops, const gated_scores& bias, cudaStream_t stream) {
  launch(ops, bias, stream);
}


void flash_attention_backward(const flash_operands& ops, const flash_grads& g, const no_scores& bias,
                              cudaStream_t stream) {
  launch_backward(ops, g, bias, stream);
}
void flash_attention_backward(const flash_operands& ops, const flash_grads& g, const alibi_scores& bias,
                              cudaStream_t stream) {
  launch_backward(ops, g, bias, stream);
}
void flash_attention_backward(const flash_operands& ops, const flash_grads& g, const t5_scores& bias,
                              cudaStream_t stream) {
  launch_backward(ops, g, bias, stream);
}
void flash_attention_backward(const flash_operands& ops, const flash_grads& g, const fox_scores& bias,
                              cudaStream_t stream) {
  launch_backward(ops, g, bias, stream);
}
void flash_attention_backward(const flash_operands& ops, const flash_grads& g, const gated_scores& bias,
                              cudaStream_t stream) {
  launch_backward(ops, g, bias, stream);
}

}  // namespace grape::cuda
