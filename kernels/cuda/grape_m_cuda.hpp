#pragma once
// CUDA GRAPE-M (the CPU call: cpu/grape_m.hpp): learnable frequencies, one row shared or one per
// key head, turned by integer positions or by real per-token phases, on a stream.
//
//   const grape::cuda::device_grape_m m(spec);        // spec.freqs on the host; build once per model
//   grape::cuda::grape_m_rotate_qk(m, args, {d_phases, rows}, total_tokens, d_error_flag, stream);
//
// args is the CPU call's rotate_qk_args with device pointers: layouts, strides, varlen, ids or
// offsets (without phases), GQA and f32/f16/bf16 as the CPU call. One shared row of θ >= 0 with
// integer positions runs the rotate_qk kernel; otherwise one block per token (grape_m_thread.hpp).
// grape_m_param_grads gives dL/dθ and dL/dΦ (grape_m_grads_thread.hpp).
// A bad position or a non-finite phase sets *device_error_flag and leaves that token untouched.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/grape_m_args.hpp"
#include "cuda/device_arrays.hpp"
#include "cuda/rotate_qk_cuda.hpp"

namespace grape::cuda {

/// GRAPE-M's frequencies in device memory: θ's turn fractions, θ/2π and θ per (row, plane), and the
/// rotate_qk tables when the spec is one shared row of θ >= 0. spec.phases must be null (phases
/// come with each call); the spec is checked as the CPU checks it.
class device_grape_m {
 public:
  explicit device_grape_m(const kernel::grape_m_spec& spec);

  /// The spec, its freqs pointing at a host copy held here.
  const kernel::grape_m_spec& spec() const { return spec_; }
  const std::uint64_t* turn_fractions() const { return fractions_; }
  const double* turns() const { return turns_; }
  const double* thetas() const { return thetas_; }
  /// Set when rotate_qk's kernel takes integer-position calls: the spec as a rotary spec, its tables.
  const rotary_spec* rotary() const { return rotary_ ? &*rotary_ : nullptr; }
  const device_rotary* rotary_tables() const { return rotary_tables_.get(); }

 private:
  kernel::grape_m_spec spec_;
  std::vector<double> freqs_;
  device_arrays arrays_;
  const std::uint64_t* fractions_ = nullptr;
  const double* turns_ = nullptr;
  const double* thetas_ = nullptr;
  std::optional<rotary_spec> rotary_;    // one shared row of θ >= 0
  std::unique_ptr<device_rotary> rotary_tables_;
};

/// Per-token phases Φ in device memory, [rows, total_tokens] float64 (rows: 1 or the key heads);
/// values null: integer positions. origin (same shape, or null): dL/dθ's origin, as
/// kernel::grape_m_spec::phase_origin.
struct device_phases {
  const double* values = nullptr;
  int rows = 1;
  const double* origin = nullptr;
};

/// Rotates Q and K (total_tokens is required with cu_seqlens: device memory is not read).
void grape_m_rotate_qk(const device_grape_m& m, const kernel::rotate_qk_args& args, device_phases phases,
                       std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream);

/// Backward: reads dL/d(out) through args' in pointers, writes dL/d(in) through out (−angle).
void grape_m_rotate_qk_backward(const device_grape_m& m, const kernel::rotate_qk_args& args, device_phases phases,
                                std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream);

/// dL/dθ [freq_rows, planes] and, with phases, dL/dΦ [phase_rows, total_tokens] (float64, device
/// memory, overwritten; either may be null), as cpu::grape_m_param_grads: `forward` describes the
/// forward call (inputs x in q.in / k.in), grad_q / grad_k hold dL/d(out) with the same strides.
/// Float64 atomics accumulate dL/dθ across blocks: the sum's order, and so its last bits, vary.
void grape_m_param_grads(const device_grape_m& m, const kernel::rotate_qk_args& forward, device_phases phases,
                         const void* grad_q, const void* grad_k, kernel::grape_m_grads out, std::int64_t total_tokens,
                         int* device_error_flag, cudaStream_t stream);

}  // namespace grape::cuda
