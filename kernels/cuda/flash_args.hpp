#pragma once
// What a CUDA flash-attention call is before it reaches the device: its arguments (device
// pointers), the tile plan that fits the device's shared memory, and the block program built from
// both (flash_program.hpp). Header-only and free of the CUDA runtime, so the host emulation builds
// the very program a launch gets.
#include <cstdint>

#include "common/qk_args.hpp"
#include "cuda/flash_backward_program.hpp"
#include "cuda/flash_program.hpp"

namespace grape::cuda {

/// A fused-attention call's arguments: the encoded Q, K and V (a rotation applied already, e.g. by
/// cuda::rotate_qk into a scratch buffer; channels contiguous, any token and head strides), the
/// output [tokens, q_heads, v_dim] (contiguous) and the log-sum-exp [q_heads, tokens] (or null),
/// all in device memory. Sequences: packed (cu_seqlens [batch + 1], device memory) with seq_len
/// the longest, or padded (cu_seqlens null) with seq_len tokens each.
struct flash_args {
  kernel::dtype type = kernel::dtype::f32;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  std::int64_t q_token_stride = 0, q_head_stride = 0;  // 0: dense [tokens, heads, dim]
  std::int64_t k_token_stride = 0, k_head_stride = 0;
  std::int64_t v_token_stride = 0, v_head_stride = 0;
  int q_heads = 0, k_heads = 0, v_heads = 0;  // k_heads and v_heads divide q_heads (GQA)
  int head_dim = 0, v_dim = 0;                // multiples of 16, at most 256 (v_dim 0: head_dim)
  const std::int64_t* cu_seqlens = nullptr;
  std::int64_t batch = 1, seq_len = 0, tokens = 0;
  const std::int64_t* positions = nullptr;  // per token (the bias's positions), or null: index in sequence
  bool causal = true;
  std::int64_t window = 0;  // > 0: sliding window (both sides when not causal)
  float scale = 0;          // 0: 1/sqrt(head_dim)
  int* error = nullptr;     // device int the kernel sets to 1 on a bad cu_seqlens or bias position
};

/// Rows (queries) and columns (keys) of a block's tile, its threads and shared memory.
struct flash_plan {
  int rows = 0, cols = 0, threads = 0;
  std::int64_t smem_bytes = 0;
};

/// The largest tile (rows, then cols, from 64 down to 16) whose shared memory fits smem_limit
/// bytes; rows 0 when none does.
inline flash_plan plan_flash(const flash_args& ops, std::int64_t smem_limit) {
  const int v_dim = ops.v_dim > 0 ? ops.v_dim : ops.head_dim;
  for (int rows = 64; rows >= 16; rows /= 2)
    for (int cols = 64; cols >= 16; cols /= 2) {
      const flash_smem m = flash_smem_of(static_cast<int>(kernel::element_bytes(ops.type)), rows, cols, ops.head_dim, v_dim);
      if (m.bytes <= smem_limit) return {rows, cols, 2 * rows, m.bytes};
    }
  return {};
}

template <class T, class Bias>
flash_program<T, Bias> program_of(const flash_args& ops, const flash_plan& plan, const Bias& bias) {
  flash_program<T, Bias> p;
  p.q = static_cast<const T*>(ops.q);
  p.k = static_cast<const T*>(ops.k);
  p.v = static_cast<const T*>(ops.v);
  p.out = static_cast<T*>(ops.out);
  p.lse = ops.lse;
  p.head_dim = ops.head_dim;
  p.v_dim = ops.v_dim > 0 ? ops.v_dim : ops.head_dim;
  p.q_heads = ops.q_heads;
  p.k_heads = ops.k_heads;
  p.v_heads = ops.v_heads;
  p.q_head_stride = ops.q_head_stride ? ops.q_head_stride : ops.head_dim;
  p.q_token_stride = ops.q_token_stride ? ops.q_token_stride : ops.q_heads * p.q_head_stride;
  p.k_head_stride = ops.k_head_stride ? ops.k_head_stride : ops.head_dim;
  p.k_token_stride = ops.k_token_stride ? ops.k_token_stride : ops.k_heads * p.k_head_stride;
  p.v_head_stride = ops.v_head_stride ? ops.v_head_stride : p.v_dim;
  p.v_token_stride = ops.v_token_stride ? ops.v_token_stride : ops.v_heads * p.v_head_stride;
  p.cu_seqlens = ops.cu_seqlens;
  p.seq_len = ops.seq_len;
  p.tokens = ops.tokens;
  p.positions = ops.positions;
  p.causal = ops.causal;
  p.window = ops.window;
  p.scale = ops.scale > 0 ? ops.scale : 1.0f / std::sqrt(static_cast<float>(ops.head_dim));
  p.rows = plan.rows;
  p.cols = plan.cols;
  p.error = ops.error;
  p.bias = bias;
  return p;
}

/// The backward's gradients (device memory, dense): dL/dO in, dL/dQ, dL/dK, dL/dV out, in the
/// storage type. The forward's output and log-sum-exp are ops.out and ops.lse.
struct flash_grads {
  const void* grad_out = nullptr;  // [tokens, q_heads, v_dim]
  void* grad_q = nullptr;          // [tokens, q_heads, head_dim]
  void* grad_k = nullptr;          // [tokens, k_heads, head_dim]
  void* grad_v = nullptr;          // [tokens, k_heads, v_dim]
  double* grad_bias = nullptr;     // the bias parameters' gradient (grad_size doubles, the CPU's layout), or null
  // Zeroed partials the bias gradient sums through (flash_backward_program.hpp; bias_partials_size
  // doubles each); the launch makes them, an emulation passes them.
  double* row_partials = nullptr;
  double* col_partials = nullptr;
};

/// The doubles of the zeroed partials a bias's gradient sums through (flash_grads): per query
/// (rows; a walking bias's accumulators) and per key (cols); 0 for a bias without parameters.
template <class Bias>
void bias_partials_size(const Bias& bias, int q_heads, std::int64_t tokens, std::int64_t& rows, std::int64_t& cols) {
  rows = cols = 0;
  if constexpr (walks_rows<Bias>::value) {
    rows = bias.accumulator_size(q_heads);
  } else if constexpr (has_bias_grads<Bias>::value) {
    rows = static_cast<std::int64_t>(bias.row_slots()) * q_heads * tokens;
    cols = static_cast<std::int64_t>(bias.col_slots()) * q_heads * tokens;
  }
}

/// The backward's square tile (64, 32 or 16 queries and keys) whose shared memory fits; rows 0
/// when none does.
inline flash_plan plan_flash_backward(const flash_args& ops, std::int64_t smem_limit) {
  const int v_dim = ops.v_dim > 0 ? ops.v_dim : ops.head_dim;
  for (int tile = 64; tile >= 16; tile /= 2) {
    const auto m = flash_backward_smem_of(static_cast<int>(kernel::element_bytes(ops.type)), tile, ops.head_dim, v_dim);
    if (m.bytes <= smem_limit) return {tile, tile, 2 * tile, m.bytes};
  }
  return {};
}

template <class T, class Bias>
flash_backward_program<T, Bias> backward_program_of(const flash_args& ops, const flash_grads& g,
                                                    const flash_plan& plan, const Bias& bias) {
  flash_backward_program<T, Bias> p;
  p.f = program_of<T>(ops, plan, bias);
  p.grad_out = static_cast<const T*>(g.grad_out);
  p.grad_q = static_cast<T*>(g.grad_q);
  p.grad_k = static_cast<T*>(g.grad_k);
  p.grad_v = static_cast<T*>(g.grad_v);
  p.tile = plan.rows;
  p.batch = ops.batch;
  if (g.grad_bias) {
    p.grad_bias = g.grad_bias;
    p.row_grads = g.row_partials;
    p.col_grads = g.col_partials;
  }
  return p;
}

/// Query blocks of the longest sequence: the grid's x extent (y: sequences, z: query heads; the
/// backward's key programs: the same blocks of keys, z the K/V heads).
inline std::int64_t flash_query_blocks(const flash_args& ops, const flash_plan& plan) {
  return (ops.seq_len + plan.rows - 1) / plan.rows;
}

}  // namespace grape::cuda
