#pragma once
// The host half of cuda::attention(encoding, args) (attention_cuda.hpp): what the CPU's
// cpu::attention(instance, args) call becomes on the device, with no device memory read:
//  - rotation_into: rotate_qk's arguments writing the rotated Q and K into scratch buffers that
//    share the inputs' strides;
//  - position_source: the bias's position of each token (ids on axis 0, offsets + index, or the
//    index), as the CPU's positions_of gives them;
//  - attention_operands: the flash call's operands from the CPU call's arguments.
// Header-only; attention_cuda.hpp launches, tests/cuda_emulation runs the same steps on the host.
#include <fmt/format.h>

#include <cstdint>

#include "common/attention_args.hpp"
#include "cuda/bias_positions.hpp"
#include "cuda/flash_args.hpp"
#include "cuda/flash_checks.hpp"
#include "grape/config.hpp"

namespace grape::cuda {

/// rotate_qk's arguments that read Q and K from the call and write them rotated into q_out and
/// k_out (q.size and k.size elements of the storage type, the inputs' strides).
inline kernel::rotate_qk_args rotation_into(const kernel::qk_args& qk, void* q_out, void* k_out) {
  kernel::rotate_qk_args r = kernel::rotation_of(qk);
  r.q.out = q_out;
  r.k.out = k_out;
  return r;
}

/// rotate_qk's arguments for the rotation's backward: dL/d(rotated Q, K) read from dense
/// [tokens, heads, head_dim] arrays (the flash backward's), dL/d(Q, K) written to dense arrays of
/// the same shape (kernel::attention_grad_args' layout); sequences and positions the call's.
inline kernel::rotate_qk_args rotation_back(const kernel::qk_args& qk, const void* d_rotated_q,
                                         const void* d_rotated_k, void* d_q, void* d_k, std::int64_t total_tokens,
                                         int head_dim) {
  kernel::rotate_qk_args r = kernel::rotation_of(qk);
  const auto dense = [&](const kernel::qk_tensor& t, const void* in, void* out) {
    const std::int64_t token = t.heads * head_dim;
    return kernel::qk_tensor{in, out, t.heads, total_tokens * token, qk.cu_seqlens ? 0 : qk.seq_len * token, token,
                          head_dim};
  };
  r.q = dense(qk.q, d_rotated_q, d_q);
  r.k = dense(qk.k, d_rotated_k, d_k);
  return r;
}

/// The positions a bias needs from a call: null when each token's position is its index.
inline bool has_bias_positions(const kernel::qk_args& qk) { return qk.position_ids || qk.offsets; }

inline position_source position_source_of(const kernel::qk_args& qk) {
  return {qk.position_ids, qk.position_type == kernel::index_type::i32, qk.position_ids ? nullptr : qk.offsets,
          qk.cu_seqlens, qk.batch, qk.seq_len};
}

namespace detail {

/// An operand's addressable extent against its size, and a padded layout the flash call can walk
/// (token t of sequence b at t·token_stride: batch_stride = seq_len·token_stride).
inline void check_attention_operand(const kernel::qk_tensor& t, const kernel::qk_args& qk, std::int64_t tokens,
                                    int dim, const char* name) {
  require(t.token_stride >= 0 && t.head_stride >= 0,
          fmt::format("{}: token_stride and head_stride must be >= 0", name));
  if (!qk.cu_seqlens && qk.batch > 1)
    require(t.batch_stride == qk.seq_len * t.token_stride,
            fmt::format("{}.batch_stride: cuda::attention reads padded sequences as [batch, seq_len, heads, dim]: "
                        "must be seq_len·token_stride = {} (got {})",
                        name, qk.seq_len * t.token_stride, t.batch_stride));
  if (tokens > 0)
    require((tokens - 1) * t.token_stride + (t.heads - 1) * t.head_stride + dim <= t.size,
            fmt::format("{}.size: {} elements, fewer than its strides address ({})", name, t.size,
                        (tokens - 1) * t.token_stride + (t.heads - 1) * t.head_stride + dim));
}

}  // namespace detail

/// The flash call of a CPU attention call whose pointers are device memory, on the encoded Q and K
/// at q and k (the inputs' strides) and the bias positions (or null). With cu_seqlens, seq_len
/// must hold the longest sequence (device memory is not read on the host), total_tokens the
/// tokens; padded: total_tokens = batch·seq_len.
inline flash_args attention_operands(const kernel::attention_args& a, const void* q, const void* k,
                                         const std::int64_t* positions, int head_dim, std::int64_t total_tokens,
                                         int* error) {
  const kernel::qk_args& qk = a.qk;
  const int v_dim = a.v_dim > 0 ? a.v_dim : head_dim;
  detail::require(total_tokens >= 0, fmt::format("total_tokens: must be >= 0 (got {})", total_tokens));
  if (qk.cu_seqlens)
    detail::require(qk.seq_len > 0 || total_tokens == 0,
                    "seq_len: with cu_seqlens, cuda::attention needs the longest sequence's length");
  else
    detail::require(total_tokens == qk.batch * qk.seq_len,
                    fmt::format("total_tokens: must be batch·seq_len = {} (got {})", qk.batch * qk.seq_len,
                                total_tokens));
  detail::require(a.keys == nullptr, "keys: K and V on tokens of their own run on the CPU only (cpu::attention)");
  detail::require(qk.q.in != nullptr && qk.k.in != nullptr && a.v.in != nullptr, "q.in, k.in, v.in: must not be null");
  detail::require(a.out != nullptr, "out: must not be null");
  detail::check_attention_operand(qk.q, qk, total_tokens, head_dim, "q");
  detail::check_attention_operand(qk.k, qk, total_tokens, head_dim, "k");
  detail::check_attention_operand(a.v, qk, total_tokens, v_dim, "v");
  flash_args ops;
  ops.type = qk.type;
  ops.q = q;
  ops.k = k;
  ops.v = a.v.in;
  ops.out = a.out;
  ops.lse = a.lse;
  ops.q_token_stride = qk.q.token_stride;
  ops.q_head_stride = qk.q.head_stride;
  ops.k_token_stride = qk.k.token_stride;
  ops.k_head_stride = qk.k.head_stride;
  ops.v_token_stride = a.v.token_stride;
  ops.v_head_stride = a.v.head_stride;
  ops.q_heads = static_cast<int>(qk.q.heads);
  ops.k_heads = static_cast<int>(qk.k.heads);
  ops.v_heads = static_cast<int>(a.v.heads);
  ops.head_dim = head_dim;
  ops.v_dim = v_dim;
  ops.cu_seqlens = qk.cu_seqlens;
  ops.batch = qk.batch;
  ops.seq_len = qk.seq_len;
  ops.tokens = total_tokens;
  ops.positions = positions;
  ops.causal = a.causal;
  ops.window = a.window;
  ops.scale = a.scale;
  ops.error = error;
  check_flash(ops);
  return ops;
}

}  // namespace grape::cuda
