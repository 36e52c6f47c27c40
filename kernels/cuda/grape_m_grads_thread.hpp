#pragma once
// The per-thread body of the CUDA GRAPE-M parameter gradients (the CPU call:
// cpu::grape_m_param_grads): one block per token, the forward's cos/sin table first (fill_table,
// grape_m_thread.hpp), then one (head, plane) unit per thread at a time, which forms y = R(φ)x and
// dL/dφ = g₁y₀ − g₀y₁ in float64 and adds sign·(p − origin)·dL/dφ to dL/dθ of its row and plane and
// sign·θ·dL/dφ to dL/dΦ of its row and token. Blocks share dL/dθ, so the adds are atomic on the
// device (float64 atomicAdd, sm_60 and later); both outputs are zeroed before the launch. Plain
// arithmetic otherwise: tests/cuda_emulation runs it on the host, one thread at a time.
#include <cstdint>

#include "cuda/atomic_add.hpp"
#include "cuda/grape_m_thread.hpp"

namespace grape::cuda {

/// A gradient launch: the forward call (out = in, sin_sign = angle_sign) and the gradients.
struct grape_m_grads_call {
  grape_m_call c;
  const void* grad_q = nullptr;  // dL/d(out) of Q and K, with the inputs' strides
  const void* grad_k = nullptr;
  const double* thetas = nullptr;  // [freq_rows, planes] θ
  double* d_freqs = nullptr;       // [freq_rows, planes] dL/dθ, zeroed first; or null
  double* d_phases = nullptr;      // [phase_rows, total_tokens] dL/dΦ, zeroed first; or null
};

template <class T, math::layout_kind Layout>
struct grape_m_grads_thread {
  grape_m_grads_call g;

  /// Phase 1: the forward's cos/sin table of the token.
  GRAPE_HOST_DEVICE void fill_table(std::int64_t token, int tid, int nthreads, float* table) const {
    grape_m_token_thread<T, Layout>{g.c}.fill_table(token, tid, nthreads, table);
  }

  /// Phase 2: every (head, plane) unit of the token.
  GRAPE_HOST_DEVICE void rotate(std::int64_t token, int tid, int nthreads, const float* table) const {
    const grape_m_call& c = g.c;
    const grape_m_token_thread<T, Layout> forward{c};
    const auto place = kernel::locate_token(c.p, token);
    if (!forward.token_ok(token, place)) return;  // reported by fill_table
    const std::int64_t total = (c.p.q.heads + c.p.k.heads) * c.planes;
    const int rd = 2 * c.planes;
    for (std::int64_t u = tid; u < total; u += nthreads) {
      const std::int64_t head_all = u / c.planes;
      const int j = static_cast<int>(u % c.planes);
      const bool is_q = head_all < c.p.q.heads;
      const kernel::qk_operand& t = is_q ? c.p.q : c.p.k;
      const std::int64_t h = is_q ? head_all : head_all - c.p.q.heads;
      const std::int64_t base = kernel::token_offset(t, c.p, token, place) + h * t.head_stride;
      const T* x = static_cast<const T*>(t.in) + base;
      const T* dy = static_cast<const T*>(is_q ? g.grad_q : g.grad_k) + base;
      const std::int64_t kv = is_q ? h / c.group : h;
      const std::int64_t row = c.table_rows == 1 ? 0 : kv;
      math::sin_cos sc;
      if (c.table) sc = {table[row * 2 * c.planes + c.planes + j], table[row * 2 * c.planes + j]};
      else sc = forward.plane_sincos(token, place, kv, j);
      const int c0 = math::first_channel(Layout, j, rd), c1 = math::second_channel(Layout, j, rd);
      const double x0 = storage<T>::load(x[c0]), x1 = storage<T>::load(x[c1]);
      const double y0 = x0 * sc.cos - x1 * sc.sin, y1 = x1 * sc.cos + x0 * sc.sin;  // sc.sin carries the sign
      const double dphi = storage<T>::load(dy[c1]) * y0 - storage<T>::load(dy[c0]) * y1;
      const std::int64_t fr = c.freq_rows == 1 ? 0 : kv, pr = c.phase_rows == 1 ? 0 : kv;
      const double p = c.phases != nullptr ? c.phases[pr * c.p.total_tokens + token]
                                           : static_cast<double>(kernel::position_of(c.p, token, place, 0));
      // dL/dθ from p − origin (cpu::grape_m_param_grads says why)
      const double origin = c.phases && c.phase_origin ? c.phase_origin[pr * c.p.total_tokens + token] : 0.0;
      const double sign = c.sin_sign;  // φ = sign·p·θ
      if (g.d_freqs != nullptr) add_to(g.d_freqs + fr * c.planes + j, sign * (p - origin) * dphi);
      if (g.d_phases != nullptr) add_to(g.d_phases + pr * c.p.total_tokens + token, sign * g.thetas[fr * c.planes + j] * dphi);
    }
  }
};

}  // namespace grape::cuda
