// GRAPE-M's learnable and contextual rotations (grape_m.hpp).
//
// One shared frequency row with integer positions is a rotary spec: rotate_qk's own kernels run
// it (−angle: rotate_qk's backward). Otherwise one pass over the tokens (the body below): per
// token and key head a cos/sin table from turn fractions — exact ones, m·f mod 2^64, for integer
// positions; for real phases the angle Φ·θ/2π formed in float64 and its fraction taken to 2^-63
// turn — with rotate_qk's sine and cosine (math/sincos.hpp), then the float32 rotation of the key
// head and its query group. The parameter gradients: the same angle, with y = R(φ)x formed again
// in float64 (grape_m_param_grads) or read from the forward's output while the same float32 table
// turns the gradients back (grape_m_rotate_qk_backward_with_grads).
#include "cpu/grape_m.hpp"

#include <algorithm>
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

/// One thread's float32 cos and sin·sin_sign of every plane at one (token, key head): the turn
/// fraction of m·θ (integer positions, exact) or of Φ·θ/2π (real phases, formed in float64), then
/// rotate_qk's sine and cosine.
class plane_angles {
 public:
  plane_angles(const grape_m_spec& s, const detail::grape_m_turns& turns, float sin_sign)
      : s_(s), turns_(turns), sin_sign_(sin_sign), phase_(s.planes), cos_(s.planes), sin_(s.planes) {}

  /// Whether key head kv turns by angles of its own (else by those of the key head before it).
  bool own_row(std::int64_t kv) const { return kv == 0 || s_.freq_rows > 1 || s_.phase_rows > 1; }

  void fill(const detail::rotate_plan& p, std::int64_t kv, std::int64_t t, detail::token_place place) {
    const std::int64_t row = (s_.freq_rows == 1 ? 0 : kv) * s_.planes;
    if (s_.phases == nullptr) {
      const std::int64_t m = detail::position_of(p, t, place, 0);
      for (int j = 0; j < s_.planes; ++j) phase_[j] = math::phase_at(m, turns_.fractions[row + j]);
    } else {
      const double position = position_value(s_, p, kv, t, place);
      for (int j = 0; j < s_.planes; ++j) phase_[j] = math::phase_of_turns(position * turns_.turns[row + j]);
    }
    // Apart from the phases: phase_of_turns's range test would keep this loop scalar.
#pragma omp simd
    for (int j = 0; j < s_.planes; ++j) {
      const math::sin_cos sc = math::sincos_of_phase(phase_[j]);
      cos_[j] = sc.cos;
      sin_[j] = sin_sign_ * sc.sin;
    }
  }
  const float* cos() const { return cos_.data(); }
  const float* sin() const { return sin_.data(); }

 private:
  const grape_m_spec& s_;
  const detail::grape_m_turns& turns_;
  float sin_sign_;
  std::vector<math::phase_t> phase_;
  std::vector<float> cos_, sin_;
};

/// One head turned by the angles' planes in float32. Half-split pairs (j, j + planes) are apart
/// from each other, so they go from `in` to `out` directly (in place too); interleaved ones go
/// through `x` (head_dim floats). A copy of the whole head through `x` read back in halves stalls
/// on store forwarding: at head_dim 16 it cost more than the rotation.
template <class Storage>
void rotate_head(const grape_m_spec& s, const plane_angles& a, const Storage* in, Storage* out, float* x) {
  const float *c = a.cos(), *sf = a.sin();
  const int planes = s.planes;
  if (s.layout == math::layout_kind::half_split) {
#pragma omp simd
    for (int j = 0; j < planes; ++j) {
      const math::pair2<float> y =
          math::rotate_pair(static_cast<float>(in[j]), static_cast<float>(in[j + planes]), sf[j], c[j]);
      out[j] = static_cast<Storage>(y.first);
      out[j + planes] = static_cast<Storage>(y.second);
    }
    if (in != out) std::copy(in + 2 * planes, in + s.head_dim, out + 2 * planes);
    return;
  }
  for (int ch = 0; ch < s.head_dim; ++ch) x[ch] = static_cast<float>(in[ch]);
  for (int j = 0; j < planes; ++j) {
    const math::pair2<float> y = math::rotate_pair(x[2 * j], x[2 * j + 1], sf[j], c[j]);
    x[2 * j] = y.first;
    x[2 * j + 1] = y.second;
  }
  for (int ch = 0; ch < s.head_dim; ++ch) out[ch] = static_cast<Storage>(x[ch]);
}

template <class Storage>
void rotate_tokens(const grape_m_spec& s, const grape_m_plan& pp, float sin_sign) {
  const detail::rotate_plan& p = pp.owned.plan;
  const int n = p.threads > 0 ? p.threads : detail::max_threads();
  const detail::grape_m_turns turns = detail::turns_of(s);
#pragma omp parallel num_threads(n)
  {
    plane_angles angles(s, turns, sin_sign);
    std::vector<float> x(p.head_dim);
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < p.total_tokens; ++t) {
      const detail::token_place place = detail::locate_token(p, t);
      for (std::int64_t kv = 0; kv < pp.kv_heads; ++kv) {
        if (angles.own_row(kv)) angles.fill(p, kv, t, place);
        for_group_heads(p, pp.group, kv, [&](const detail::qk_operand& op, std::int64_t h) {
          const std::int64_t at = detail::token_offset(op, p, t, place) + h * op.head_stride;
          rotate_head(s, angles, static_cast<const Storage*>(op.in) + at, static_cast<Storage*>(op.out) + at,
                      x.data());
        });
      }
    }
  }
}

/// dL/dθ and dL/dΦ's shares of one (token, key head) from its planes' dL/dφ (the angle turned is
/// φ = sign·Φ·θ, so the chain rule carries the sign into both): dtheta [freq_rows, planes] and
/// dphase [phase_rows] are added to; dL/dθ from Φ − origin (grape_m_grads says why).
void add_plane_grads(const grape_m_spec& s, const detail::rotate_plan& p, std::int64_t kv, std::int64_t t,
                     double position, const double* dphi, double* dtheta, double* dphase) {
  const std::int64_t fr = s.freq_rows == 1 ? 0 : kv, pr = s.phase_rows == 1 ? 0 : kv;
  const double origin = s.phases && s.phase_origin ? s.phase_origin[pr * p.total_tokens + t] : 0.0;
  const double phi = s.angle_sign * (position - origin);
  const double* theta = s.freqs + fr * s.planes;
  for (int j = 0; j < s.planes; ++j) {
    dtheta[fr * s.planes + j] += phi * dphi[j];
    dphase[pr] += s.angle_sign * theta[j] * dphi[j];
  }
}

/// Each thread's dL/dθ summed into out.freqs (when asked for).
void sum_partial_freqs(const std::vector<double>& partial, std::size_t freq_count, int threads, double* out) {
  if (out == nullptr) return;
  for (std::size_t i = 0; i < freq_count; ++i) {
    double sum = 0;
    for (int th = 0; th < threads; ++th) sum += partial[static_cast<std::size_t>(th) * freq_count + i];
    out[i] = sum;
  }
}

/// A pass that gives dL/dθ and dL/dΦ (either may be null in `out`): per (token, key head),
/// body(t, place, kv, dphi) adds that key head's planes' dL/dφ into dphi (and writes whatever else
/// its pass writes); make_body() gives each thread its body. Per plane, with y = R(φ)x and
/// g = dL/dy, dL/dφ = g₁y₀ − g₀y₁. A token belongs to one thread: its dΦ entries are written, not
/// accumulated; dL/dθ is summed per thread in float64, then over threads.
template <class MakeBody>
void plane_grads_pass(const grape_m_spec& s, const grape_m_plan& pp, grape_m_grads out, MakeBody make_body) {
  const detail::rotate_plan& p = pp.owned.plan;
  const std::size_t freq_count = static_cast<std::size_t>(s.freq_rows) * s.planes;
  const int n = p.threads > 0 ? p.threads : detail::max_threads();
  std::vector<double> partial(static_cast<std::size_t>(n) * freq_count, 0.0);
#pragma omp parallel num_threads(n)
  {
    double* dtheta = partial.data() + static_cast<std::size_t>(detail::thread_index()) * freq_count;
    std::vector<double> dphi(s.planes), dphase(s.phase_rows);
    auto body = make_body();
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < p.total_tokens; ++t) {
      const detail::token_place place = detail::locate_token(p, t);
      std::fill(dphase.begin(), dphase.end(), 0.0);
      for (std::int64_t kv = 0; kv < pp.kv_heads; ++kv) {
        std::fill(dphi.begin(), dphi.end(), 0.0);
        body(t, place, kv, dphi.data());
        add_plane_grads(s, p, kv, t, position_value(s, p, kv, t, place), dphi.data(), dtheta, dphase.data());
      }
      if (out.phases != nullptr)  // (integer positions: refused before)
        for (int r = 0; r < s.phase_rows; ++r) out.phases[r * p.total_tokens + t] = dphase[r];
    }
  }
  sum_partial_freqs(partial, freq_count, n, out.freqs);
}

/// grape_m_param_grads: y = R(φ)x formed again from the inputs x, with cos/sin in float64.
template <class Storage>
void param_grads_of(const grape_m_spec& s, const grape_m_plan& pp, const void* grad_q, const void* grad_k,
                    grape_m_grads out) {
  const detail::rotate_plan& p = pp.owned.plan;
  const int rd = 2 * s.planes;
  plane_grads_pass(s, pp, out, [&] {
    return [&, cs = std::vector<double>(s.planes), sn = std::vector<double>(s.planes)](
               std::int64_t t, detail::token_place place, std::int64_t kv, double* dphi) mutable {
      phase_table(s, kv, position_value(s, p, kv, t, place), cs.data(), sn.data());
      for (int j = 0; j < s.planes; ++j) sn[j] *= s.angle_sign;
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
    };
  });
}

/// grape_m_rotate_qk_backward_with_grads: y read from the forward's outputs; per (token, key head)
/// one float32 cos/sin table turns g back and nothing else is formed.
template <class Storage>
void backward_with_grads_of(const grape_m_spec& s, const grape_m_plan& pp, const void* rotated_q,
                            const void* rotated_k, grape_m_grads out) {
  const detail::rotate_plan& p = pp.owned.plan;
  const int rd = 2 * s.planes;
  const detail::grape_m_turns turns = detail::turns_of(s);
  plane_grads_pass(s, pp, out, [&] {
    return [&, angles = plane_angles(s, turns, static_cast<float>(-s.angle_sign)),
            x = std::vector<float>(p.head_dim)](std::int64_t t, detail::token_place place, std::int64_t kv,
                                                double* dphi) mutable {
      if (angles.own_row(kv)) angles.fill(p, kv, t, place);
      for_group_heads(p, pp.group, kv, [&](const detail::qk_operand& op, std::int64_t h) {
        const std::int64_t at = detail::token_offset(op, p, t, place) + h * op.head_stride;
        const auto* y = static_cast<const Storage*>(&op == &p.q ? rotated_q : rotated_k) + at;
        const auto* g = static_cast<const Storage*>(op.in) + at;
        for (int j = 0; j < s.planes; ++j) {  // before g is turned back (out may be in)
          const int c0 = math::first_channel(s.layout, j, rd), c1 = math::second_channel(s.layout, j, rd);
          dphi[j] += static_cast<double>(static_cast<float>(g[c1])) * static_cast<float>(y[c0]) -
                     static_cast<double>(static_cast<float>(g[c0])) * static_cast<float>(y[c1]);
        }
        rotate_head(s, angles, g, static_cast<Storage*>(op.out) + at, x.data());
      });
    };
  });
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

void grape_m_rotate_qk_backward_with_grads(const grape_m_spec& s, const rotate_qk_args& backward,
                                           const void* rotated_q, const void* rotated_k, grape_m_grads out) {
  const grape_m_plan pp = detail::plan_grape_m(s, detail::backward_grads_call_args(s, backward, rotated_q, rotated_k, out));
  detail::with_storage(backward.type, [&]<class T>() { backward_with_grads_of<T>(s, pp, rotated_q, rotated_k, out); });
}

void grape_m_param_grads(const grape_m_spec& s, const rotate_qk_args& forward, const void* grad_q,
                         const void* grad_k, grape_m_grads out) {
  const grape_m_plan pp = detail::plan_grape_m(s, detail::grads_call_args(s, forward, grad_q, grad_k, out));
  detail::with_storage(forward.type, [&]<class T>() { param_grads_of<T>(s, pp, grad_q, grad_k, out); });
}

}  // namespace grape::cpu
