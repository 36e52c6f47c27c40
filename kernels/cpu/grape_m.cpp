// GRAPE-M's learnable and contextual rotations (grape_m.hpp).
//
// One shared frequency row with integer positions is a rotary spec: rotate_qk's own kernels run
// it (−angle: rotate_qk's backward). Otherwise one pass over the tokens (the body below): per
// token and key head a cos/sin table from turn fractions — exact ones, m·f mod 2^64, for integer
// positions; for real phases the angle Φ·θ/2π formed in float64 and its fraction taken to 2^-63
// turn — with rotate_qk's sine and cosine (math/sincos.hpp), then the float32 rotation of the key
// head and its query group. Every parameter gradient: the same angle, its cos/sin in float64.
#include "cpu/grape_m.hpp"

#include <cmath>
#include <numbers>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "common/grape_m_plan.hpp"
#include "common/rotate_addressing.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "cpu/storage_dispatch.hpp"
#include "cpu/threads.hpp"
#include "grape/math/sincos.hpp"
#include "grape/detail/error.hpp"
#include "grape/schedule/spec_check.hpp"

namespace grape::cpu {

using detail::grape_m_plan;

namespace {

// ---- one shared row, integer positions: rotate_qk ---------------------------------------------

void rotate_as_spec(const rotary_spec& spec, const rotate_qk_args& args, bool backward, int angle_sign) {
  // Turning by −angle is rotate_qk's backward (its attention factor is 1 here).
  backward != (angle_sign < 0) ? rotate_qk_backward(spec, args) : rotate_qk(spec, args);
}

}  // namespace

// ---- the token body: per-head rows, real phases, and the parameter gradients ------------------

namespace {

/// p of one (token, key head): its phase Φ, or its integer position.
double position_value(const grape_m_spec& s, const detail::rotate_plan& p, std::int64_t kv, std::int64_t token,
                      detail::token_place place) {
  if (s.phases == nullptr) return static_cast<double>(detail::position_of(p, token, place, 0));
  return s.phases[(s.phase_rows == 1 ? 0 : kv) * p.total_tokens + token];
}

/// cos and sin of p·θ for one (token, key head): formed and reduced in float64.
void phase_table(const grape_m_spec& s, std::int64_t kv, double phi, double* cs, double* sn) {
  const double* theta = s.freqs + (s.freq_rows == 1 ? 0 : kv) * s.planes;
  for (int j = 0; j < s.planes; ++j) {
    const double angle = std::remainder(phi * theta[j], 6.283185307179586476925286766559);
    cs[j] = std::cos(angle);
    sn[j] = std::sin(angle);
  }
}

/// The heads of key head `kv`: its own in K, its query group in Q; calls f(operand, head).
template <class F>
void for_group_heads(const detail::rotate_plan& p, std::int64_t group, std::int64_t kv, F&& f) {
  if (p.k.heads > 0) f(p.k, kv);
  for (std::int64_t h = kv * group; h < (kv + 1) * group; ++h) f(p.q, h);
}

template <class Storage>
void rotate_tokens(const grape_m_spec& s, const grape_m_plan& pp, float sin_sign) {
  const detail::rotate_plan& p = pp.owned.plan;
  const int n = p.threads > 0 ? p.threads : detail::max_threads();
  const detail::grape_m_turns turns = detail::turns_of(s);
  const std::vector<math::phase_t>& fractions = turns.fractions;
  const std::vector<double>& theta_turns = turns.turns;
#pragma omp parallel num_threads(n)
  {
    std::vector<float> c(s.planes), sf(s.planes), x(p.head_dim);
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < p.total_tokens; ++t) {
      const detail::token_place place = detail::locate_token(p, t);
      for (std::int64_t kv = 0; kv < pp.kv_heads; ++kv) {
        if (kv == 0 || s.freq_rows > 1 || s.phase_rows > 1) {
          const std::int64_t row = (s.freq_rows == 1 ? 0 : kv) * s.planes;
          if (s.phases == nullptr) {
            const std::int64_t m = detail::position_of(p, t, place, 0);
            const math::phase_t* f = fractions.data() + row;
#pragma omp simd
            for (int j = 0; j < s.planes; ++j) {
              const math::sin_cos sc = math::sincos_of_phase(math::phase_at(m, f[j]));
              c[j] = sc.cos;
              sf[j] = sin_sign * sc.sin;
            }
          } else {
            const double position = position_value(s, p, kv, t, place);
            const double* turns = theta_turns.data() + row;
#pragma omp simd
            for (int j = 0; j < s.planes; ++j) {
              const math::sin_cos sc = math::sincos_of_phase(math::phase_of_turns(position * turns[j]));
              c[j] = sc.cos;
              sf[j] = sin_sign * sc.sin;
            }
          }
        }
        for_group_heads(p, pp.group, kv, [&](const detail::qk_operand& op, std::int64_t h) {
          const std::int64_t at = detail::token_offset(op, p, t, place) + h * op.head_stride;
          const auto* in = static_cast<const Storage*>(op.in) + at;
          auto* out = static_cast<Storage*>(op.out) + at;
          for (int ch = 0; ch < p.head_dim; ++ch) x[ch] = static_cast<float>(in[ch]);
          if (s.layout == math::layout_kind::half_split) {
            float* __restrict x0 = x.data();
            float* __restrict x1 = x.data() + s.planes;
#pragma omp simd
            for (int j = 0; j < s.planes; ++j) {
              const math::pair2<float> y = math::rotate_pair(x0[j], x1[j], sf[j], c[j]);
              x0[j] = y.first;
              x1[j] = y.second;
            }
          } else {
            for (int j = 0; j < s.planes; ++j) {
              const math::pair2<float> y = math::rotate_pair(x[2 * j], x[2 * j + 1], sf[j], c[j]);
              x[2 * j] = y.first;
              x[2 * j + 1] = y.second;
            }
          }
          for (int ch = 0; ch < p.head_dim; ++ch) out[ch] = static_cast<Storage>(x[ch]);
        });
      }
    }
  }
}

/// dL/dθ, and dL/dΦ with real phases. Per plane, with y = R(φ)x and g = dL/dy, dL/dφ = g₁y₀ − g₀y₁;
/// φ = Φ·θ, so dL/dθ gathers Φ·dL/dφ over tokens and heads, dL/dΦ gathers θ·dL/dφ over planes
/// and heads. A token belongs to one thread: its dΦ entries are written, not accumulated.
template <class Storage>
void param_grads_of(const grape_m_spec& s, const grape_m_plan& pp, const void* grad_q, const void* grad_k,
                 grape_m_grads out) {
  const detail::rotate_plan& p = pp.owned.plan;
  const int rd = 2 * s.planes;
  const std::size_t freq_count = static_cast<std::size_t>(s.freq_rows) * s.planes;
  const int n = p.threads > 0 ? p.threads : detail::max_threads();
  std::vector<double> partial(static_cast<std::size_t>(n) * freq_count, 0.0);
#pragma omp parallel num_threads(n)
  {
    double* dtheta = partial.data() + static_cast<std::size_t>(detail::thread_index()) * freq_count;
    std::vector<double> cs(s.planes), sn(s.planes), dphi(s.planes), dphase(s.phase_rows);
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < p.total_tokens; ++t) {
      const detail::token_place place = detail::locate_token(p, t);
      std::fill(dphase.begin(), dphase.end(), 0.0);
      for (std::int64_t kv = 0; kv < pp.kv_heads; ++kv) {
        const double position = position_value(s, p, kv, t, place);
        phase_table(s, kv, position, cs.data(), sn.data());
        for (int j = 0; j < s.planes; ++j) sn[j] *= s.angle_sign;
        std::fill(dphi.begin(), dphi.end(), 0.0);
        for_group_heads(p, pp.group, kv, [&](const detail::qk_operand& op, std::int64_t h) {
          const std::int64_t at = detail::token_offset(op, p, t, place) + h * op.head_stride;
          const auto* x = static_cast<const Storage*>(op.in) + at;
          const auto* g = static_cast<const Storage*>(&op == &p.q ? grad_q : grad_k) + at;
          for (int j = 0; j < s.planes; ++j) {
            const int c0 = math::first_channel(s.layout, j, rd), c1 = math::second_channel(s.layout, j, rd);
            const math::pair2<double> y = math::rotate_pair<double>(static_cast<float>(x[c0]),
                                                                   static_cast<float>(x[c1]), sn[j], cs[j]);
            dphi[j] += static_cast<float>(g[c1]) * y.first - static_cast<float>(g[c0]) * y.second;
          }
        });
        const std::int64_t fr = s.freq_rows == 1 ? 0 : kv, pr = s.phase_rows == 1 ? 0 : kv;
        // φ = sign·Φ·θ: the chain rule carries the sign into both gradients; dL/dθ from Φ − origin.
        const double origin = s.phases && s.phase_origin ? s.phase_origin[pr * p.total_tokens + t] : 0.0;
        const double phi = s.angle_sign * (position - origin);
        const double* theta = s.freqs + fr * s.planes;
        for (int j = 0; j < s.planes; ++j) {
          dtheta[fr * s.planes + j] += phi * dphi[j];
          dphase[pr] += s.angle_sign * theta[j] * dphi[j];
        }
      }
      if (out.phases != nullptr)  // (integer positions: refused above)
        for (int r = 0; r < s.phase_rows; ++r) out.phases[r * p.total_tokens + t] = dphase[r];
    }
  }
  if (out.freqs != nullptr)
    for (std::size_t i = 0; i < freq_count; ++i) {
      double sum = 0;
      for (int th = 0; th < n; ++th) sum += partial[static_cast<std::size_t>(th) * freq_count + i];
      out.freqs[i] = sum;
    }
}

void rotate(const grape_m_spec& s, const rotate_qk_args& args, bool backward) {
  const detail::grape_m_heads heads = detail::check_grape_m(s, args);
  if (const auto spec = detail::grape_m_rotary_spec(s)) return rotate_as_spec(*spec, args, backward, s.angle_sign);
  const grape_m_plan pp = detail::plan_grape_m(s, heads, args);
  const float sign = static_cast<float>(backward ? -s.angle_sign : s.angle_sign);
  detail::with_storage(args.type, [&]<class T>() { rotate_tokens<T>(s, pp, sign); });
}

}  // namespace

void grape_m_rotate_qk(const grape_m_spec& spec, const rotate_qk_args& args) { rotate(spec, args, false); }

void grape_m_rotate_qk_backward(const grape_m_spec& spec, const rotate_qk_args& args) { rotate(spec, args, true); }

void grape_m_param_grads(const grape_m_spec& s, const rotate_qk_args& forward, const void* grad_q,
                         const void* grad_k, grape_m_grads out) {
  const grape_m_plan pp = detail::plan_grape_m(s, detail::grads_call_args(s, forward, grad_q, grad_k, out));
  detail::with_storage(forward.type, [&]<class T>() { param_grads_of<T>(s, pp, grad_q, grad_k, out); });
}

}  // namespace grape::cpu
