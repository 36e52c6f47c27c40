#pragma once
// CUDA rotate_qk: the CPU kernel's arguments (kernel::rotate_qk_args), with every pointer on the
// device, on a stream. Same layouts, strides, positions and offsets, GQA, partial rotary,
// multi-axis planes, f32/f16/bf16 storage with f32 arithmetic and the same exact phase.
// cos/sin come from the exact phase on the fly, or from a float32 cache uploaded once
// (device_rotary with cache_positions > 0; the same rows as the CPU's rotary_cache, never bf16).
#include <cstdint>

#include "common/qk_args.hpp"
#include "cuda/device_arrays.hpp"
#include "grape/schedule/rotary_spec.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda {

/// The spec's turn fractions (and plane axes) in device memory, and optionally a float32 cos/sin
/// cache for positions [0, cache_positions); build once per model.
class device_rotary {
 public:
  explicit device_rotary(const rotary_spec& spec, std::int64_t cache_positions = 0);
  const std::uint64_t* turn_fractions() const { return turn_fractions_; }
  const int* plane_axis() const { return plane_axis_; }
  const float* cache() const { return cache_; }
  std::int64_t cache_positions() const { return cache_positions_; }

 private:
  device_arrays arrays_;
  const std::uint64_t* turn_fractions_ = nullptr;
  const int* plane_axis_ = nullptr;
  const float* cache_ = nullptr;
  std::int64_t cache_positions_ = 0;
};

/// Launches the rotation. total_tokens is required with cu_seqlens (device memory is not read on
/// the host). Bad positions (negative, or >= args.max_position) set *device_error_flag to 1 and
/// leave that token untouched. Shapes and strides are validated on the host (grape::input_error).
/// args.cache must be null: the device cache, if any, is the one in `tables`.
void rotate_qk(const rotary_spec& spec, const device_rotary& tables, const kernel::rotate_qk_args& args,
               std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream);

/// Backward: reads dL/d(out) through args' in pointers and writes dL/d(in) through out (rotation by
/// −angle, times the attention factor), as cpu::rotate_qk_backward.
void rotate_qk_backward(const rotary_spec& spec, const device_rotary& tables, const kernel::rotate_qk_args& args,
                        std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream);

/// dL/dθ [rotary_dim / 2] (float64, device memory) as cpu::rotate_qk_inv_freq_grad: forward's q.in
/// and k.in the rotation's inputs, grads' q.in and k.in dL/d(rotated Q, K) at their own strides (the
/// same heads, sequences and positions); a bad position flags and that token adds nothing. Per-token
/// partials summed in token order (rotate_freq_grad_thread.hpp): the same bits on every run.
void rotate_qk_inv_freq_grad(const rotary_spec& spec, const device_rotary& tables, const kernel::rotate_qk_args& forward,
                             const kernel::rotate_qk_args& grads, double* grad_inv_freq, std::int64_t total_tokens,
                             int* device_error_flag, cudaStream_t stream,
                             kernel::position_origin origin = kernel::position_origin::zero);

}  // namespace grape::cuda
