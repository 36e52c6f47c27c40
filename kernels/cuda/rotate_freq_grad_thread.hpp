#pragma once
// The per-thread bodies of the CUDA frequency gradient of rotate_qk (cpu::rotate_qk_inv_freq_grad's
// formula): with y = a·R(m_i θ_i)x per plane and g = dL/dy,
//   dL/dθ_i = Σ_{tokens, heads of Q and K} m_i·(g1·y0 − g0·y1),
// in two launches: a block per token (two_phase_kernel: the token's cos/sin table filled in shared
// memory exactly as rotate_qk fills it, then a thread per plane sums the token's heads into the
// token's partial, float64), then a thread per plane adds the tokens' partials in token order, so
// the result is the same bits on every run. Plain arithmetic on the CPU's validated plan (device
// pointers): tests/cuda_emulation runs the same bodies on the host.
#include <cstdint>

#include "cuda/rotate_qk_thread.hpp"
#include "grape/math/rotate.hpp"

namespace grape::cuda {

struct freq_grad_call {
  rotate_plan p;                   // the forward's plan: q.in and k.in the rotation's inputs x
  kernel::qk_operand gq, gk;  // dL/dy through `in`, at their own strides (Q's and K's heads)
  double* partial = nullptr;       // [tokens, rotary_dim / 2]
  std::int64_t max_position = 0, cache_rows = 0;
  int* error_flag = nullptr;       // set to 1 for a bad position (the token adds nothing)
  kernel::position_origin origin = kernel::position_origin::zero;
};

template <class T>
struct freq_grad_token {
  freq_grad_call c;

  /// The table rotate_qk's kernel makes (the same body).
  GRAPE_HOST_DEVICE rotate_token_thread<T, 1, math::layout_kind::half_split> rotation() const {
    return {c.p, {}, c.max_position, c.cache_rows, c.error_flag};
  }
  /// Phase 1: the token's table in shared memory.
  GRAPE_HOST_DEVICE void fill_table(std::int64_t token, int tid, int nthreads, float* table) const {
    rotation().fill_table(token, tid, nthreads, table);
  }
  /// Phase 2 (two_phase_kernel's second call): each plane's sum over the token's heads.
  GRAPE_HOST_DEVICE void rotate(std::int64_t token, int tid, int nthreads, const float* table) const {
    const rotate_plan& p = c.p;
    const auto place = kernel::locate_token(p, token);
    const int half = p.rotary_dim / 2;
    double* out = c.partial + token * half;
    const bool ok = rotation().token_ok(token, place);
    for (int i = tid; i < half; i += nthreads) {
      if (!ok) {  // reported by fill_table; the token adds nothing
        out[i] = 0.0;
        continue;
      }
      const int c0 = math::first_channel(p.layout, i, p.rotary_dim), c1 = math::second_channel(p.layout, i, p.rotary_dim);
      const double cs = table[i], sn = table[half + i];
      double sum = 0;
      const auto add_heads = [&](const kernel::qk_operand& x_op, const kernel::qk_operand& g_op) {
        const std::int64_t x_base = kernel::token_offset(x_op, p, token, place);
        const std::int64_t g_base = kernel::token_offset(g_op, p, token, place);
        for (std::int64_t h = 0; h < x_op.heads; ++h) {
          const T* x = static_cast<const T*>(x_op.in) + x_base + h * x_op.head_stride;
          const T* g = static_cast<const T*>(g_op.in) + g_base + h * g_op.head_stride;
          const double x0 = storage<T>::load(x[c0]), x1 = storage<T>::load(x[c1]);
          const math::pair2<double> y = math::rotate_pair(x0, x1, sn, cs);
          sum += static_cast<double>(storage<T>::load(g[c1])) * y.first -
                 static_cast<double>(storage<T>::load(g[c0])) * y.second;
        }
      };
      add_heads(p.q, c.gq);
      add_heads(p.k, c.gk);
      const int axis = p.plane_axis ? p.plane_axis[i] : 0;
      out[i] = static_cast<double>(kernel::position_from(p, token, place, axis, c.origin)) * sum;
    }
  }
};

/// One plane per item, after every token: the partials in token order.
struct freq_grad_sum {
  const double* partial = nullptr;  // [tokens, planes]
  std::int64_t tokens = 0;
  int planes = 0;
  double* grad_inv_freq = nullptr;  // [planes]
  GRAPE_HOST_DEVICE void operator()(std::int64_t i) const {
    double s = 0;
    for (std::int64_t t = 0; t < tokens; ++t) s += partial[t * planes + i];
    grad_inv_freq[i] = s;
  }
};

}  // namespace grape::cuda
