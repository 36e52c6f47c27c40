// Host side of the CUDA flash attention: the checks (flash_checks.hpp), the tile plan for the
// device's shared memory, and the dispatch on the storage type to the per-dtype launches
// (flash_*.cu).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <stdexcept>
#include <string>
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

void check_cuda_call(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: ") + what + ": " + cudaGetErrorString(e));
}

/// Stream-ordered zeroed device memory for the bias gradient's partials, freed on the stream.
class zeroed_doubles {
 public:
  zeroed_doubles(std::int64_t count, cudaStream_t stream) : stream_(stream) {
    if (count <= 0) return;
    const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(double);
    check_cuda_call(cudaMallocAsync(&data_, bytes, stream), "cudaMallocAsync of the bias gradient's partials");
    check_cuda_call(cudaMemsetAsync(data_, 0, bytes, stream), "zeroing the bias gradient's partials");
  }
  ~zeroed_doubles() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  zeroed_doubles(const zeroed_doubles&) = delete;
  zeroed_doubles& operator=(const zeroed_doubles&) = delete;
  double* get() const { return static_cast<double*>(data_); }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

template <class Bias>
void launch_backward(const flash_operands& ops, const flash_grads& grads, const Bias& bias, cudaStream_t stream) {
  check_flash_backward(ops, grads);
  check_flash_bias(ops, bias);
  check_flash_bias_grads(ops, grads, bias);
  flash_grads g = grads;
  std::int64_t row_slots = 0, col_slots = 0;
  if constexpr (has_bias_grads<Bias>::value)
    if (g.grad_bias) {
      row_slots = bias.row_slots();
      col_slots = bias.col_slots();
      check_cuda_call(
          cudaMemsetAsync(g.grad_bias, 0, static_cast<std::size_t>(bias.grad_size(ops.q_heads)) * sizeof(double), stream),
          "zeroing grad_bias");
    }
  const zeroed_doubles rows(row_slots * ops.q_heads * ops.tokens, stream), cols(col_slots * ops.q_heads * ops.tokens,
                                                                               stream);
  g.row_partials = rows.get();
  g.col_partials = cols.get();
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
void flash_attention(const flash_operands& ops, const linear_scores& bias, cudaStream_t stream) {
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
void flash_attention_backward(const flash_operands& ops, const flash_grads& g, const linear_scores& bias,
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
