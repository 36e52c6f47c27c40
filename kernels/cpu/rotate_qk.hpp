#pragma once
// CPU rotary kernels (RoPE and its multi-axis forms) on Q and K.
//
// Addressing and positions: common/qk_args.hpp. Plane i turns by position[plane_axis[i]]·θ_i.
//
// Arithmetic is float32 whatever the storage; the phase m·θ_i is exact (grape/math/phase.hpp);
// attention_factor multiplies cos and sin, as in the reference (so logits scale by its square).
// Bad arguments throw grape::input_error naming the argument; nothing is read or written then.
#include <cstdint>

#include "cpu/kernel_vocabulary.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape::cpu {

/// Rotates Q and K by the spec's angles (after the QK-norm, and into the KV cache, when set).
void rotate_qk(const rotary_spec& spec, const rotate_qk_args& args);

/// Backward of rotate_qk: reads dL/d(out) from `in` and writes dL/d(in) to `out` (rotation by
/// −angle, times attention_factor). Same arguments otherwise; qk_norm and kv_cache must be null.
void rotate_qk_backward(const rotary_spec& spec, const rotate_qk_args& args);

/// dL/dθ_i, i < rotary_dim/2, summed over tokens and heads of Q and K and written to
/// grad_inv_freq: `forward` describes the forward call (its q.in / k.in are the inputs x; out is
/// not used) and grad_q / grad_k hold dL/d(out) with the same strides. Accumulated in double.
void rotate_qk_inv_freq_grad(const rotary_spec& spec, const rotate_qk_args& forward, const void* grad_q,
                             const void* grad_k, double* grad_inv_freq,
                             position_origin origin = position_origin::zero);

/// The simple entry: contiguous [tokens, heads, head_dim], one tensor, int64 positions
/// [num_axes, tokens], on-the-fly cos/sin. `out` may equal `in`.
void apply_rotary(const grape::rotary_spec& spec, dtype type, const void* in, void* out,
                  std::int64_t tokens, std::int64_t heads, const std::int64_t* positions);

}  // namespace grape::cpu
