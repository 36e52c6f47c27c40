#pragma once
// The arguments of a GRAPE-M call (cpu::grape_m_rotate_qk, cuda::grape_m_rotate_qk; what the
// rotation is: cpu/grape_m.hpp) and of its parameter gradients.
#include <cstdint>

#include "common/qk_args.hpp"
#include "grape/math/rotate.hpp"

namespace grape::kernel {

struct grape_m_spec {
  int head_dim = 0;
  int planes = 0;                               // rotated channels = 2·planes <= head_dim
  math::layout_kind layout = math::layout_kind::half_split;
  const double* freqs = nullptr;                // [freq_rows, planes] θ, radians per unit of p
  int freq_rows = 1;                            // 1 or the key heads
  const double* phases = nullptr;               // [phase_rows, total_tokens] Φ; nullptr: integer p
  int phase_rows = 1;                           // 1 or the key heads
  int angle_sign = 1;                           // +1, or −1: every plane turns by −p·θ
  const double* phase_origin = nullptr;         // [phase_rows, total_tokens], or null: dL/dθ below
};

/// dL/dθ [freq_rows, planes] and, with phases, dL/dΦ [phase_rows, total_tokens]; `forward`
/// describes the forward call (inputs x in q.in / k.in), grad_q / grad_k hold dL/d(out) with the
/// same strides. Either output may be null (not computed); both are overwritten, not added to.
/// dL/dθ = Σ_t Φ_t·dL/dφ_t; with spec.phase_origin, Σ_t (Φ_t − origin_t)·dL/dφ_t. The two differ by
/// Σ_t origin_t·dL/dφ_t, which is 0 in exact arithmetic when the rotated Q and K enter only
/// through their pairs' scores and origin is constant over each sequence (the relative law: every
/// token turned by the same extra phase changes nothing); without it, at large Φ the float32
/// dL/dφ_t's rounding, multiplied by Φ, swamps a sum whose terms nearly cancel. The fused
/// attention passes the phase of each sequence's first token.
struct grape_m_grads {
  double* freqs = nullptr;
  double* phases = nullptr;
};
}  // namespace grape::kernel
