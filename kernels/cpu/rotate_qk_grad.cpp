// dL/dθ_i for rotate_qk. With y = a·R(mθ)x per plane, dy0/dφ = −y1 and dy1/dφ = y0, so
//   dL/dθ_i = Σ_{tokens, heads} m_i · (g1·y0 − g0·y1),   g = dL/dy, m_i the plane's position.
// Run-time shapes only (a training-time kernel, not the hot path); accumulated in double per
// thread, then summed.
#include <Eigen/Core>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "cpu/rotate_qk_item.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "cpu/threads.hpp"
#include "grape/detail/error.hpp"

namespace grape::cpu {
namespace {

template <class Storage>
void accumulate(const detail::rotate_plan& p, const void* grad_q, const void* grad_k, double* out,
                position_origin origin) {
  const int half = p.rotary_dim / 2;
  const int n = p.threads > 0 ? p.threads : detail::max_threads();
  std::vector<double> partial(static_cast<std::size_t>(n) * half, 0.0);
#pragma omp parallel num_threads(n)
  {
    double* acc = partial.data() + static_cast<std::size_t>(detail::thread_index()) * half;
    std::vector<float> table(static_cast<std::size_t>(p.rotary_dim));
    std::vector<double> pos(static_cast<std::size_t>(half));
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < p.total_tokens; ++t) {
      const detail::token_place place = detail::locate_token(p, t);
      const float* tab = detail::token_table<0>(p, t, place, table.data());
      for (int i = 0; i < half; ++i)
        pos[i] = static_cast<double>(detail::position_from(p, t, place, p.plane_axis ? p.plane_axis[i] : 0, origin));
      const std::pair<const detail::qk_operand*, const void*> operands[2] = {{&p.q, grad_q},
                                                                             {&p.k, grad_k}};
      for (const auto& [op, grad] : operands) {
        if (op->heads == 0) continue;
        const std::int64_t base = detail::token_offset(*op, p, t, place);
        for (std::int64_t h = 0; h < op->heads; ++h) {
          const auto* x = static_cast<const Storage*>(op->in) + base + h * op->head_stride;
          const auto* g = static_cast<const Storage*>(grad) + base + h * op->head_stride;
          for (int i = 0; i < half; ++i) {
            const int c0 = math::first_channel(p.layout, i, p.rotary_dim);
            const int c1 = math::second_channel(p.layout, i, p.rotary_dim);
            const double x0 = static_cast<float>(x[c0]), x1 = static_cast<float>(x[c1]);
            const double cs = tab[i], sn = tab[half + i];
            const math::pair2<double> y = math::rotate_pair(x0, x1, sn, cs);
            acc[i] += pos[i] * (static_cast<float>(g[c1]) * y.first - static_cast<float>(g[c0]) * y.second);
          }
        }
      }
    }
  }
  for (int i = 0; i < half; ++i) {
    double s = 0;
    for (int t = 0; t < n; ++t) s += partial[static_cast<std::size_t>(t) * half + i];
    out[i] = s;
  }
}

}  // namespace

void rotate_qk_inv_freq_grad(const rotary_spec& spec, const rotate_qk_args& forward, const void* grad_q,
                             const void* grad_k, double* grad_inv_freq, position_origin origin) {
  if (grad_inv_freq == nullptr) throw input_error("grad_inv_freq is null");
  if (forward.qk_norm != nullptr || forward.kv_cache != nullptr)
    throw input_error("qk_norm and kv_cache are forward-only: pass null to rotate_qk_inv_freq_grad");
  if (forward.q.heads > 0 && grad_q == nullptr) throw input_error("grad_q is null");
  if (forward.k.heads > 0 && grad_k == nullptr) throw input_error("grad_k is null");
  // The forward arguments are validated with out = in (the gradients share their strides).
  rotate_qk_args args = forward;
  args.q.out = const_cast<void*>(args.q.in);
  args.k.out = const_cast<void*>(args.k.in);
  const detail::owned_plan owned = detail::make_rotate_plan(spec, args);
  switch (forward.type) {
    case dtype::f32: return accumulate<float>(owned.plan, grad_q, grad_k, grad_inv_freq, origin);
    case dtype::f16: return accumulate<Eigen::half>(owned.plan, grad_q, grad_k, grad_inv_freq, origin);
    case dtype::bf16: return accumulate<Eigen::bfloat16>(owned.plan, grad_q, grad_k, grad_inv_freq, origin);
  }
}

}  // namespace grape::cpu
