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

#include "cpu/grape_m_plan.hpp"
#include "cpu/rotate_qk_addressing.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "cpu/storage_dispatch.hpp"
#include "cpu/threads.hpp"
#include "grape/math/sincos.hpp"
#include "grape/detail/error.hpp"
#include "grape/schedule/spec_check.hpp"

namespace grape::cpu {

using detail::grape_m_plan;

namespace {

[[noreturn]] void fail(const std::string& what) { throw input_error("grape_m: " + what); }

/// The heads of the call: key heads (the rows' unit) and query heads per key head.
struct head_groups {
  std::int64_t kv_heads;
  std::int64_t group;
};

head_groups check_spec(const grape_m_spec& s, const rotate_qk_args& args) {
  if (s.head_dim <= 0) fail(fmt::format("head_dim must be positive (got {})", s.head_dim));
  if (s.planes <= 0 || 2 * s.planes > s.head_dim)
    fail(fmt::format("planes must be in [1, head_dim / 2 = {}] (got {})", s.head_dim / 2, s.planes));
  if (s.layout != math::layout_kind::half_split && s.layout != math::layout_kind::interleaved)
    fail("layout must be half_split or interleaved");
  if (s.freqs == nullptr) fail("freqs is null");
  if (s.angle_sign != 1 && s.angle_sign != -1) fail(fmt::format("angle_sign must be 1 or -1 (got {})", s.angle_sign));
  if (args.q.heads <= 0 && args.k.heads <= 0) fail("q, k: at least one must have heads");
  const std::int64_t kv = args.k.heads > 0 ? args.k.heads : args.q.heads;
  if (args.q.heads > 0 && args.q.heads % kv != 0)
    fail(fmt::format("q has {} heads, not a multiple of k's {}", args.q.heads, kv));
  const head_groups g{kv, args.q.heads > 0 ? args.q.heads / kv : 0};
  if (s.freq_rows != 1 && s.freq_rows != kv)
    fail(fmt::format("freqs: rows must be 1 or the key heads {} (got {})", kv, s.freq_rows));
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(s.freq_rows) * s.planes; ++i)
    if (!std::isfinite(s.freqs[i]))
      fail(fmt::format("freqs[{}][{}] is not finite", i / s.planes, i % s.planes));
  if (s.phases != nullptr && s.phase_rows != 1 && s.phase_rows != kv)
    fail(fmt::format("phases: rows must be 1 or the key heads {} (got {})", kv, s.phase_rows));
  if (args.cache != nullptr) fail("cache: GRAPE-M computes its angles; pass null");
  if (args.qk_norm != nullptr || args.kv_cache != nullptr)
    fail("qk_norm and kv_cache: not fused into GRAPE-M's rotation; pass null");
  return g;
}

// ---- one shared row, integer positions: rotate_qk ---------------------------------------------

void rotate_as_spec(const rotary_spec& spec, const rotate_qk_args& args, bool backward, int angle_sign) {
  // Turning by −angle is rotate_qk's backward (its attention factor is 1 here).
  backward != (angle_sign < 0) ? rotate_qk_backward(spec, args) : rotate_qk(spec, args);
}

}  // namespace

// ---- the checked plan (grape_m_plan.hpp) --------------------------------------------------------

namespace {

/// plan_grape_m after check_spec gave the call's heads.
grape_m_plan plan_checked(const grape_m_spec& s, const head_groups& g, const rotate_qk_args& args,
                          const detail::device_indices* device) {
  if (s.phases != nullptr && (args.position_ids != nullptr || args.offsets != nullptr))
    fail("positions, offsets: contextual GRAPE-M turns by its phases; pass neither");
  encoding_shape shape;
  shape.owner = "grape_m";
  shape.head_dim = s.head_dim;
  shape.rotary_dim = 2 * s.planes;
  shape.q_layout = shape.k_layout = s.layout;
  grape_m_plan p{detail::make_instance_plan(shape, args, device), g.kv_heads, g.group};
  const std::int64_t tokens = p.owned.plan.total_tokens;
  if (s.phases != nullptr && device == nullptr)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(s.phase_rows) * tokens; ++i)
      if (!std::isfinite(s.phases[i])) fail(fmt::format("phases[{}][{}] is not finite", i / tokens, i % tokens));
  return p;
}

}  // namespace

grape_m_plan detail::plan_grape_m(const grape_m_spec& s, const rotate_qk_args& args, const device_indices* device) {
  return plan_checked(s, check_spec(s, args), args, device);
}

detail::grape_m_turns detail::turns_of(const grape_m_spec& s) {
  const std::size_t count = static_cast<std::size_t>(s.freq_rows) * s.planes;
  grape_m_turns t{std::vector<math::phase_t>(count), std::vector<double>(count)};
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::isfinite(s.freqs[i])) fail(fmt::format("freqs[{}][{}] is not finite", i / s.planes, i % s.planes));
    t.fractions[i] = math::turn_fraction_of(s.freqs[i]);
    t.turns[i] = s.freqs[i] / (2 * std::numbers::pi);
  }
  return t;
}

std::optional<rotary_spec> detail::grape_m_rotary_spec(const grape_m_spec& s) {
  if (s.phases != nullptr || s.freq_rows != 1) return std::nullopt;
  for (int j = 0; j < s.planes; ++j)
    if (s.freqs[j] < 0) return std::nullopt;
  rotary_spec spec;
  spec.head_dim = s.head_dim;
  spec.rotary_dim = 2 * s.planes;
  spec.layout = s.layout;
  spec.inv_freq.assign(s.freqs, s.freqs + s.planes);
  return spec;
}

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
  const head_groups g = check_spec(s, args);
  if (const auto spec = detail::grape_m_rotary_spec(s)) return rotate_as_spec(*spec, args, backward, s.angle_sign);
  const grape_m_plan pp = plan_checked(s, g, args, nullptr);
  const float sign = static_cast<float>(backward ? -s.angle_sign : s.angle_sign);
  detail::with_storage(args.type, [&]<class T>() { rotate_tokens<T>(s, pp, sign); });
}

}  // namespace

void grape_m_rotate_qk(const grape_m_spec& spec, const rotate_qk_args& args) { rotate(spec, args, false); }

void grape_m_rotate_qk_backward(const grape_m_spec& spec, const rotate_qk_args& args) { rotate(spec, args, true); }

rotate_qk_args detail::grads_call_args(const grape_m_spec& s, const rotate_qk_args& forward, const void* grad_q,
                                       const void* grad_k, const grape_m_grads& out) {
  if (forward.q.heads > 0 && grad_q == nullptr) fail("grad_q is null");
  if (forward.k.heads > 0 && grad_k == nullptr) fail("grad_k is null");
  if (s.phases == nullptr && out.phases != nullptr)
    fail("phases: integer positions have no phase gradient; pass null");
  rotate_qk_args args = forward;
  args.q.out = const_cast<void*>(args.q.in);
  args.k.out = const_cast<void*>(args.k.in);
  return args;
}

void grape_m_param_grads(const grape_m_spec& s, const rotate_qk_args& forward, const void* grad_q,
                         const void* grad_k, grape_m_grads out) {
  const grape_m_plan pp = detail::plan_grape_m(s, detail::grads_call_args(s, forward, grad_q, grad_k, out));
  detail::with_storage(forward.type, [&]<class T>() { param_grads_of<T>(s, pp, grad_q, grad_k, out); });
}

}  // namespace grape::cpu
