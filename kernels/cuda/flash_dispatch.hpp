#pragma once
// The host steps of one CUDA flash attention call, forward or backward, for any score functor (a
// built-in's from flash_scores.hpp, or a score view's): the checks (flash_checks.hpp), the bias
// gradient's zeroed partials, the tile plan for the device's shared memory, the positions' range
// check of a bias that reads per-token arrays, and the dispatch on the storage type to the
// per-dtype launches (flash_*.cu, or GRAPE_FLASH_SCORE_VIEW's). Host code: flash_host.cpp and
// cuda::attention (attention_cuda.hpp) both run it.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>

#include "cuda/errors.hpp"
#include "cuda/flash_checks.hpp"
#include "cuda/flash_launch.hpp"
#include "cuda/stream_scratch.hpp"

namespace grape::cuda::detail {

inline std::int64_t gate_length(const fox_scores& b) { return b.length; }
inline std::int64_t gate_length(const gated_scores& b) { return b.length; }
inline std::int64_t gate_length(const path_integral_scores& b) { return b.terms.length; }

/// A bias with per-token arrays (FoX's, gated GRAPE-A's, GRAPE-AP's: a gate_length above): one of
/// `count` positions past them sets the error flag. Nothing for another bias or null positions.
template <class Bias>
void check_bias_positions(const std::int64_t* positions, std::int64_t count, const Bias& bias, int* error,
                          cudaStream_t stream) {
  if constexpr (requires { gate_length(bias); })
    if (positions) launch_position_check(positions, count, gate_length(bias), error, stream);
}

template <class Bias>
void launch_flash(const flash_args& ops, const Bias& bias, cudaStream_t stream) {
  check_flash(ops);
  check_flash_bias(ops, bias);
  if (ops.tokens == 0 || ops.seq_len == 0) return;
  const flash_plan plan = plan_flash(ops, shared_memory_limit());
  require(plan.rows > 0,
          fmt::format("head_dim {}, v_dim {}: no tile fits the device's shared memory", ops.head_dim, ops.v_dim));
  check_bias_positions(ops.positions, ops.tokens, bias, ops.error, stream);
  switch (ops.type) {
    case kernel::dtype::f32: return launch_flash_f32(ops, plan, bias, stream);
    case kernel::dtype::f16: return launch_flash_f16(ops, plan, bias, stream);
    case kernel::dtype::bf16: return launch_flash_bf16(ops, plan, bias, stream);
  }
}

template <class Bias>
void launch_flash_backward(const flash_args& ops, const flash_grads& grads, const Bias& bias,
                           cudaStream_t stream) {
  check_flash_backward(ops, grads);
  check_flash_bias(ops, bias);
  check_flash_bias_grads(ops, grads, bias);
  flash_grads g = grads;
  std::int64_t row_partials = 0, col_partials = 0;
  if constexpr (has_bias_grads<Bias>::value || walks_rows<Bias>::value)
    if (g.grad_bias) {
      bias_partials_size(bias, ops.q_heads, ops.tokens, row_partials, col_partials);
      check_cuda(
          cudaMemsetAsync(g.grad_bias, 0, static_cast<std::size_t>(bias.grad_size(ops.q_heads)) * sizeof(double), stream),
          "zeroing grad_bias");
    }
  const stream_scratch rows(static_cast<std::size_t>(row_partials) * sizeof(double), stream, true),
      cols(static_cast<std::size_t>(col_partials) * sizeof(double), stream, true);
  g.row_partials = static_cast<double*>(rows.get());
  g.col_partials = static_cast<double*>(cols.get());
  if (ops.tokens == 0 || ops.seq_len == 0) return;
  const flash_plan plan = plan_flash_backward(ops, shared_memory_limit());
  require(plan.rows > 0, fmt::format("head_dim {}, v_dim {}: no backward tile fits the device's shared memory",
                                     ops.head_dim, ops.v_dim));
  check_bias_positions(ops.positions, ops.tokens, bias, ops.error, stream);
  switch (ops.type) {
    case kernel::dtype::f32: return launch_flash_backward_f32(ops, g, plan, bias, stream);
    case kernel::dtype::f16: return launch_flash_backward_f16(ops, g, plan, bias, stream);
    case kernel::dtype::bf16: return launch_flash_backward_bf16(ops, g, plan, bias, stream);
  }
}

}  // namespace grape::cuda::detail
