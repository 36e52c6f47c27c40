#pragma once
// The host-side checks of a CUDA flash-attention call (no device access): a bad field throws
// grape::input_error naming it, before anything is launched. Host code only (fmt).
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda/flash_args.hpp"
#include "cuda/flash_scores.hpp"
#include "grape/detail/error.hpp"

namespace grape::cuda {
namespace detail {

inline void require(bool ok, const std::string& message) {
  if (!ok) throw input_error(message);
}

inline void check_dim(int dim, const char* name) {
  require(dim >= 16 && dim <= 256 && dim % 16 == 0,
          fmt::format("{}: must be a multiple of 16 in [16, 256] (got {})", name, dim));
}

}  // namespace detail

inline void check_flash(const flash_args& ops) {
  detail::require(ops.type == kernel::dtype::f32 || ops.type == kernel::dtype::f16 || ops.type == kernel::dtype::bf16,
          "type: must be f32, f16 or bf16");
  detail::require(ops.q_heads > 0 && ops.q_heads <= 65535,
                  fmt::format("q_heads: must be in [1, 65535] (got {})", ops.q_heads));
  detail::require(ops.k_heads > 0 && ops.q_heads % ops.k_heads == 0,
          fmt::format("k_heads: must divide q_heads = {} (got {})", ops.q_heads, ops.k_heads));
  detail::require(ops.v_heads > 0 && ops.q_heads % ops.v_heads == 0,
          fmt::format("v_heads: must divide q_heads = {} (got {})", ops.q_heads, ops.v_heads));
  detail::check_dim(ops.head_dim, "head_dim");
  if (ops.v_dim != 0) detail::check_dim(ops.v_dim, "v_dim");
  detail::require(ops.batch >= 1 && ops.batch <= 65535,
                  fmt::format("batch: must be in [1, 65535] (got {})", ops.batch));
  detail::require(ops.seq_len >= 0 && ops.tokens >= 0, "seq_len, tokens: must be >= 0");
  if (ops.cu_seqlens == nullptr)
    detail::require(ops.batch * ops.seq_len == ops.tokens,
            fmt::format("tokens: must be batch × seq_len = {} without cu_seqlens (got {})", ops.batch * ops.seq_len,
                        ops.tokens));
  for (auto [stride, name] : {std::pair{ops.q_token_stride, "q_token_stride"}, {ops.q_head_stride, "q_head_stride"},
                              {ops.k_token_stride, "k_token_stride"}, {ops.k_head_stride, "k_head_stride"},
                              {ops.v_token_stride, "v_token_stride"}, {ops.v_head_stride, "v_head_stride"}})
    detail::require(stride >= 0, fmt::format("{}: must be >= 0 (0: dense)", name));
  detail::require(ops.window >= 0, fmt::format("window: must be >= 0 (got {})", ops.window));
  detail::require(std::isfinite(ops.scale) && ops.scale >= 0, "scale: must be finite and >= 0 (0: 1/sqrt(head_dim))");
  detail::require(ops.error != nullptr, "error: the device flag must be given");
  if (ops.tokens > 0 && ops.seq_len > 0)
    detail::require(ops.q && ops.k && ops.v && ops.out, "q, k, v, out: must not be null");
}

/// The backward's: the forward's checks, its output and log-sum-exp, the gradients, and one head
/// count for K and V (a block owns both of a head's gradients).
inline void check_flash_backward(const flash_args& ops, const flash_grads& g) {
  check_flash(ops);
  detail::require(ops.k_heads == ops.v_heads,
                  fmt::format("v_heads: the backward needs k_heads = v_heads (got {} and {})", ops.k_heads,
                              ops.v_heads));
  if (ops.tokens > 0 && ops.seq_len > 0) {
    detail::require(ops.out != nullptr && ops.lse != nullptr,
                    "out, lse: the forward's output and log-sum-exp must be given");
    detail::require(g.grad_out && g.grad_q && g.grad_k && g.grad_v,
                    "grad_out, grad_q, grad_k, grad_v: must not be null");
  }
}

inline void check_flash_bias(const flash_args&, const no_scores&) {}

inline void check_flash_bias(const flash_args&, const alibi_scores& bias) {
  detail::require(bias.slopes != nullptr, "slopes: must not be null");
}

inline void check_flash_bias(const flash_args&, const linear_scores& bias) {
  detail::require(bias.coef != nullptr, "coef: must not be null");
}

inline void check_flash_bias(const flash_args& ops, const t5_scores& bias) {
  detail::require(bias.by_distance != nullptr, "by_distance: must not be null (t5_distance_table)");
  detail::require(bias.heads == ops.q_heads,
                  fmt::format("by_distance: must have q_heads = {} heads (got {})", ops.q_heads, bias.heads));
  detail::require(bias.max_distance >= 1, fmt::format("max_distance: must be >= 1 (got {})", bias.max_distance));
}

namespace detail {

/// A bias that indexes a sequence of `length` gates by position: positions given are checked on
/// the device (launch_position_check); without them the sequences' indices must lie inside.
inline void check_gate_length(const flash_args& ops, std::int64_t length) {
  if (ops.positions == nullptr)
    require(ops.seq_len <= length, fmt::format("seq_len: the gates cover {} positions (got {})", length, ops.seq_len));
}

}  // namespace detail

inline void check_flash_bias(const flash_args& ops, const fox_scores& bias) {
  detail::require(bias.prefix != nullptr && bias.length >= 0, "prefix: must not be null");
  detail::check_gate_length(ops, bias.length);
}

inline void check_flash_bias(const flash_args& ops, const gated_scores& bias) {
  detail::require(bias.omega != nullptr && bias.key_gate != nullptr && bias.length >= 0,
                  "omega, key_gate: must not be null");
  detail::check_gate_length(ops, bias.length);
}

inline void check_flash_bias(const flash_args& ops, const path_integral_scores& bias) {
  const path_terms& t = bias.terms;
  detail::require(t.slopes && t.rows && t.keys && t.offset_cos && t.offset_sin && t.length >= 0,
                  "slopes, rows, keys, offset_cos, offset_sin: must not be null");
  detail::require(t.dim > 0 && t.dim % 2 == 0, fmt::format("dim: must be even and > 0 (got {})", t.dim));
  detail::require(t.heads == ops.q_heads,
                  fmt::format("heads: the path-integral bias must have q_heads = {} heads (got {})", ops.q_heads,
                              t.heads));
  detail::check_gate_length(ops, t.length);
}

/// A bias gradient asked for: the bias must have parameters, and (gated GRAPE-A, T5) the fields
/// its layout needs.
template <class Bias>
void check_flash_bias_grads(const flash_args& ops, const flash_grads& g, const Bias& bias) {
  if (g.grad_bias == nullptr) return;
  if constexpr (!has_bias_grads<Bias>::value && !walks_rows<Bias>::value) {
    throw input_error("grad_bias: this bias has no parameters (pass null)");
  } else {
    if constexpr (std::is_same_v<Bias, gated_scores>)
      detail::require(bias.heads == ops.q_heads,
                      fmt::format("heads: the gated bias's gradient needs heads = q_heads = {} (got {})", ops.q_heads,
                                  bias.heads));
    if constexpr (std::is_same_v<Bias, t5_scores>)
      detail::require(bias.buckets != nullptr && bias.num_buckets > 0,
                      "buckets, num_buckets: T5's gradient needs the bucket table (t5_bucket_table)");
  }
}

}  // namespace grape::cuda
