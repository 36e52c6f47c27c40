#pragma once
// Laws on the parameter gradients an encoding declares, each against a float64 reference that
// shares no code with the gradient under test:
//   bias_gradient       a score bias's accumulate_grad (or accumulate_row_grad) and gradient,
//                       against central differences of its own bias() along a random direction (set_parameters);
//   frequency_gradient  rotation planes' dL/dθ (cpu::rotate_qk_inv_freq_grad), against the
//                       derivative of the rotation written from its definition in long double;
//   attention_gradient  the fused backward's parameter gradients (cpu::attention_backward's
//                       grad_bias and grad_inv_freq), against a dense float64 softmax backward.
// Each is claimed whenever it applies: a gradient that disagrees with its encoding is a defect.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cpu/attention_backward.hpp"
#include "cpu/rotate_qk.hpp"
#include "grape/check/attention_laws.hpp"
#include "grape/check/builtin_laws.hpp"
#include "grape/check/kernel_laws.hpp"
#include "grape/check/trial.hpp"
#include "grape/inject/score_bias.hpp"
#include "grape/rep/rotation_planes.hpp"
#include "grape/view/kernel_traits.hpp"

namespace grape::detail {

template <class P>
struct pointee {
  using type = void;
};
template <class B>
struct pointee<const B*> {
  using type = B;
};

/// The score bias of E's instance (a composition's bias part), or void.
template <class E>
using bias_type_of =
    typename pointee<decltype(kernel::bias_part(std::declval<const typename E::instance&>()))>::type;

/// E's bias gives a parameter gradient, per logit or per row.
template <class E>
constexpr bool bias_gives_gradient = [] {
  using B = bias_type_of<E>;
  if constexpr (std::is_void_v<B>) return false;
  else return BiasWithGradient<B> || BiasWithRowGradient<B>;
}();

/// ... and its parameters, which the gradient laws move (grape::check requires them together).
template <class E>
constexpr bool bias_gradient_testable = [] {
  if constexpr (bias_gives_gradient<E>) return BiasWithParameters<bias_type_of<E>>;
  else return false;
}();

template <class R>
constexpr bool is_rotation_planes = false;
template <int N>
constexpr bool is_rotation_planes<rotation_planes<N>> = true;

/// E rotates Q and K by rotation planes whose frequencies the kernels differentiate (one layout for
/// both; at run time, every plane on one axis: kernel_traits::plane_spec).
template <class E>
constexpr bool has_plane_frequencies = [] {
  if constexpr (rotates_qk<E>) {
    using I = std::remove_cvref_t<decltype(rotation_part(std::declval<const typename E::instance&>()))>;
    return is_rotation_planes<std::remove_cvref_t<decltype(std::declval<const I&>().rep)>> &&
           I::q_layout == I::k_layout;
  } else {
    return false;
  }
}();

template <class E>
std::optional<rotary_spec> plane_spec_of(const typename E::instance& inst) {
  const auto& rotation = rotation_part(inst);
  return kernel_traits<std::remove_cvref_t<decltype(rotation.rep)>>::plane_spec(rotation);
}

/// The channels (a, b) plane i turns in a head, by the layout's definition: half-split pairs i with
/// i + rotary_dim/2, interleaved 2i with 2i + 1.
inline std::array<int, 2> plane_channels(const rotary_spec& s, int i) {
  if (s.layout == layout_kind::half_split) return {i, i + s.rotary_dim / 2};
  return {2 * i, 2 * i + 1};
}

/// A random direction in parameter space (unit largest entry) and the central-difference step for it.
struct direction {
  std::vector<double> u;
  double step = 0;
  direction(std::mt19937_64& rng, const std::vector<double>& theta) : u(theta.size()) {
    std::normal_distribution<double> normal(0.0, 1.0);
    double largest = 0, theta_max = 0;
    for (double& x : u) largest = std::max(largest, std::abs(x = normal(rng)));
    for (double& x : u) x /= largest > 0 ? largest : 1.0;
    for (double x : theta) theta_max = std::max(theta_max, std::abs(x));
    step = 1e-6 * (1 + theta_max);
  }
  double along(const std::vector<double>& gradient) const {
    double s = 0;
    for (std::size_t i = 0; i < u.size(); ++i) s += gradient[i] * u[i];
    return s;
  }
  std::vector<double> moved(const std::vector<double>& theta, double sign) const {
    std::vector<double> p(theta);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += sign * step * u[i];
    return p;
  }
};

/// One logit of a bias-gradient trial: head, query and key positions, dL/db.
struct drawn_logit {
  int head = 0;
  std::int64_t m = 0, n = 0;
  float g = 0;  // a float: the row gradient takes float32 logit gradients, and both see the same value
};

struct bias_gradient_law {
  static constexpr std::string_view name = "bias_gradient";
  static constexpr std::string_view formula =
      "Σ_i (dL/dθ_i)·u_i from accumulate_grad + gradient = (L(θ + εu) − L(θ − εu))/2ε, L = Σ g·b_h(m,n)";
  static constexpr std::string_view tolerance =
      "|error| <= 1e-6 (|lhs| + |rhs|) + 16 eps64 Σ|g b| / ε, ε = 1e-6 (1 + max|θ|)";
  template <class E>
  static constexpr bool applies = bias_gradient_testable<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    using B = bias_type_of<E>;
    const B& bias = *kernel::bias_part(t.instance);
    std::vector<drawn_logit> logits(static_cast<std::size_t>(*rc::gen::inRange(1, 9)));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::string at = "logits (h, m, n):";
    for (auto& l : logits) {
      l.head = *rc::gen::inRange(0, bias.heads());
      l.n = t.draw_position();  // n first: an edge-case m is then the same position (m = n)
      l.m = t.draw_position();
      l.g = normal(t.rng);
      at += fmt::format(" ({}, {}, {})", l.head, l.m, l.n);
    }
    const auto bias_at = [](const B& b, const drawn_logit& l) {
      return b.bias(l.head, std::array<std::int64_t, 1>{l.m}, std::array<std::int64_t, 1>{l.n});
    };
    std::vector<double> theta(bias.parameter_count()), gradient(theta.size());
    std::vector<double> acc(bias.grad_accumulator_size());
    bias.parameters(theta.data());
    for (const auto& l : logits) {
      if (!std::isfinite(bias_at(bias, l))) continue;  // masked: no gradient flows
      if constexpr (BiasWithRowGradient<B>) bias.accumulate_row_grad(l.head, l.m, &l.n, &l.g, 1, acc.data());
      else bias.accumulate_grad(l.head, std::array<std::int64_t, 1>{l.m}, std::array<std::int64_t, 1>{l.n}, l.g, acc.data());
    }
    bias.gradient(acc.data(), gradient.data());
    const direction u(t.rng, theta);
    double magnitude = 0;
    const auto loss = [&](double sign) {
      B moved = bias;
      moved.set_parameters(u.moved(theta, sign).data());
      double sum = 0;
      for (const auto& l : logits) {
        if (!std::isfinite(bias_at(bias, l))) continue;
        const double term = l.g * bias_at(moved, l);
        sum += term;
        magnitude += std::abs(term);
      }
      return sum;
    };
    const double plus = loss(+1), minus = loss(-1);
    const double difference = (plus - minus) / (2 * u.step), analytic = u.along(gradient);
    const double tol = 1e-6 * (std::abs(analytic) + std::abs(difference)) + 16 * eps64 * magnitude / u.step;
    return judge(at, analytic, difference, std::abs(analytic - difference), tol,
                 "dL/du from the bias's gradient vs the central difference of its bias() along u");
  }
};

struct frequency_gradient_law {
  static constexpr std::string_view name = "frequency_gradient";
  static constexpr std::string_view formula =
      "cpu::rotate_qk_inv_freq_grad(random call, dL/dy) = Σ m·(g_b y_a − g_a y_b) over tokens, heads, planes "
      "(y = the rotation by m·θ_i in long double)";
  static constexpr std::string_view tolerance = "|error_i| <= 8 eps32 Σ |m|(|g_b y_a| + |g_a y_b|) per plane i";
  template <class E>
  static constexpr bool applies = has_plane_frequencies<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const auto spec = plane_spec_of<E>(t.instance);
    if (!spec) return std::nullopt;  // a plane on two axes: the frequencies are not per plane
    kernel_case<typename E::instance, float> call(t.rng, t.instance, kernel_positions(t));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> gq(call.q.size()), gk(call.k.size());
    for (float& x : gq) x = normal(t.rng);
    for (float& x : gk) x = normal(t.rng);
    const int planes = spec->rotary_dim / 2;
    std::vector<double> got(static_cast<std::size_t>(planes));
    cpu::rotate_qk_inv_freq_grad(*spec, call.args, gq.data(), gk.data(), got.data());
    std::vector<long double> want(static_cast<std::size_t>(planes));
    std::vector<double> scale(static_cast<std::size_t>(planes));
    constexpr long double two_pi = 6.283185307179586476925286766559L;
    const auto add = [&](const std::vector<float>& x, const std::vector<float>& g, const cpu::qk_tensor& o) {
      for (std::int64_t tok = 0; tok < call.total; ++tok)
        for (std::int64_t h = 0; h < o.heads; ++h) {
          const std::int64_t base = call.at(o, tok, h);
          for (int i = 0; i < planes; ++i) {
            const auto [a, b] = plane_channels(*spec, i);
            const long double m = static_cast<long double>(
                call.coords[tok][spec->plane_axis.empty() ? 0 : static_cast<std::size_t>(spec->plane_axis[i])]);
            const long double phi = std::fmod(m * static_cast<long double>(spec->inv_freq[i]), two_pi);
            const long double c = std::cos(phi) * spec->attention_factor, s = std::sin(phi) * spec->attention_factor;
            const long double xa = x[base + a], xb = x[base + b], ga = g[base + a], gb = g[base + b];
            const long double ya = xa * c - xb * s, yb = xa * s + xb * c;
            want[i] += m * (gb * ya - ga * yb);
            scale[i] += static_cast<double>(std::abs(m) * (std::abs(gb * ya) + std::abs(ga * yb)));
          }
        }
    };
    add(call.q, gq, call.args.q);
    add(call.k, gk, call.args.k);
    std::optional<counterexample> worst;
    double worst_excess = -1;
    for (int i = 0; i < planes; ++i) {
      const double w = static_cast<double>(want[i]), error = std::abs(got[i] - w), tol = 8 * eps32 * scale[i];
      auto c = judge(fmt::format("tokens={} q_heads={} k_heads={} positions {}..{} plane={} θ={}", call.total,
                                 call.q_heads, call.k_heads, call.coords.empty() ? 0 : call.coords.front()[0],
                                 call.coords.empty() ? 0 : call.coords.back()[0], i, spec->inv_freq[i]),
                     got[i], w, error, tol, "dL/dθ_i from the kernel vs the float64 derivative of the rotation");
      if (c && !(error - tol <= worst_excess)) worst = std::move(c), worst_excess = std::isnan(error) ? INFINITY : error - tol;
    }
    return worst;
  }
};

/// A dense float64 softmax backward of one attention call: dS_ij = P_ij (dP_ij − δ_i) for every
/// logit, with what bounds the float32 kernel's error on Σ dS·x (attention_gradient_law).
template <class Call>
struct dense_backward {
  struct logit {
    std::size_t sequence;
    std::int64_t head, i, j;  // query head; query and key indices in the sequence
    double ds, weight;        // dL/dlogit; P_ij (|dP_ij| + |δ_i| + Σ|dO||V| + Σ|dO||O|): its rounding scale
  };
  std::vector<logit> logits;
  double delta = 0;  // the largest float32 error of one logit (attention_case::compare's δ)

  dense_backward(const Call& call, const std::vector<float>& dout) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(call.d)), eps32 = std::numeric_limits<float>::epsilon();
    const int d = call.d;
    std::vector<double> qs(d), kj(d), row, dp;
    for (std::size_t b = 0; b < call.first.size(); ++b)
      for (std::int64_t h = 0; h < call.heads; ++h) {
        const std::int64_t kh = h / (call.heads / call.kv_heads);
        const int eh = call.inst.heads() == 1 ? 0 : static_cast<int>(h);
        for (std::int64_t i = 0; i < call.len[b]; ++i) {
          const std::int64_t ti = call.first[b] + i;
          for (int c = 0; c < d; ++c) qs[c] = scale * static_cast<double>(call.q[(ti * call.heads + h) * d + c]);
          row.assign(static_cast<std::size_t>(call.len[b]), -INFINITY);
          dp.assign(row.size(), 0.0);
          double top = -INFINITY;
          for (std::int64_t j = 0; j < call.len[b]; ++j) {
            const bool seen =
                (!call.args.causal || j <= i) && (call.args.window == 0 || std::abs(i - j) < call.args.window);
            if (!seen) continue;
            const std::int64_t tj = call.first[b] + j;
            for (int c = 0; c < d; ++c) kj[c] = static_cast<double>(call.k[(tj * call.kv_heads + kh) * d + c]);
            row[j] = call.inst.score(eh, qs.data(), kj.data(), std::array<std::int64_t, 1>{call.position(b, i)},
                                     std::array<std::int64_t, 1>{call.position(b, j)});
            top = max_keeping_nan(top, row[j]);
            if (std::isfinite(row[j])) delta = max_keeping_nan(delta, 8 * eps32 * (1 + std::abs(row[j])));
          }
          double sum = 0;
          for (double x : row) sum += std::isinf(x) ? 0.0 : std::exp(x - top);
          const auto* o = &call.out[(ti * call.heads + h) * d];
          const auto* g = &dout[static_cast<std::size_t>((ti * call.heads + h) * d)];
          double dot_o = 0, abs_o = 0;
          for (int c = 0; c < d; ++c) dot_o += g[c] * static_cast<double>(o[c]), abs_o += std::abs(g[c] * static_cast<double>(o[c]));
          std::vector<double> abs_v(row.size());
          for (std::int64_t j = 0; j < call.len[b]; ++j) {
            const auto* v = &call.v[((call.first[b] + j) * call.kv_heads + kh) * d];
            for (int c = 0; c < d; ++c) dp[j] += g[c] * static_cast<double>(v[c]), abs_v[j] += std::abs(g[c] * static_cast<double>(v[c]));
          }
          double delta_i = 0;
          for (std::int64_t j = 0; j < call.len[b]; ++j)
            if (!std::isinf(row[j])) delta_i += std::exp(row[j] - top) / sum * dp[j];
          for (std::int64_t j = 0; j < call.len[b]; ++j) {
            if (std::isinf(row[j])) continue;
            const double p = std::exp(row[j] - top) / sum;
            logits.push_back({b, h, i, j, p * (dp[j] - delta_i),
                              p * (std::abs(dp[j]) + std::abs(delta_i) + abs_v[j] + abs_o)});
          }
        }
      }
  }
};

struct attention_gradient_law {
  static constexpr std::string_view name = "attention_gradient";
  static constexpr std::string_view formula =
      "cpu::attention_backward's grad_bias·u and grad_inv_freq·u = Σ dS_ij ∂logit_ij/∂u of a dense float64 "
      "softmax backward (the bias's ∂/∂u by central differences, the planes' from the rotation's definition)";
  static constexpr std::string_view tolerance =
      "|error| <= (4δ + 16 (√keys + 16) eps32) Σ|∂logit/∂u| P(|dP| + |δ_i| + Σ|dO V| + Σ|dO O|), "
      "δ = attention_kernel's logit error bound";
  template <class E>
  static constexpr bool applies = runs_attention<E> && (bias_gradient_testable<E> || has_plane_frequencies<E>);

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    auto call = draw_attention_case(t, kernel_positions(t));
    cpu::attention(call.inst, call.args);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> dout(call.out.size()), dq(call.q.size()), dk(call.k.size()), dv(call.v.size());
    for (float& x : dout) x = normal(t.rng);
    cpu::attention_grad_args grads{dout.data(), dq.data(), dk.data(), dv.data()};
    std::vector<double> grad_bias, grad_freq, theta;
    std::optional<rotary_spec> spec;
    if constexpr (bias_gradient_testable<E>) {
      const auto& bias = *kernel::bias_part(call.inst);
      grad_bias.resize(bias.parameter_count());
      theta.resize(grad_bias.size());
      bias.parameters(theta.data());
      grads.grad_bias = grad_bias.data();
    }
    if constexpr (has_plane_frequencies<E>) {
      spec = plane_spec_of<E>(call.inst);
      if (spec) {
        grad_freq.resize(spec->inv_freq.size());
        grads.grad_inv_freq = grad_freq.data();
      }
    }
    if (!grads.grad_bias && !grads.grad_inv_freq) return std::nullopt;
    cpu::attention_backward(call.inst, call.args, grads);
    const dense_backward<decltype(call)> ref(call, dout);
    const double eps32 = std::numeric_limits<float>::epsilon();
    const std::int64_t keys = *std::max_element(call.len.begin(), call.len.end());
    const double rounding = 4 * ref.delta + 16 * (std::sqrt(static_cast<double>(keys)) + 16) * eps32;
    const std::string at = attention_at(call);

    // Each parameter set along its own random direction: Σ dS·∂logit/∂u against the kernel's.
    // logit_derivative gives ∂logit/∂u and the magnitude the kernel's rounding scales with.
    const auto compare = [&](const char* which, const std::vector<double>& kernel, const direction& u,
                             auto&& logit_derivative) -> std::optional<counterexample> {
      double want = 0, scale = 0;
      for (const auto& l : ref.logits) {
        const auto [x, magnitude] = logit_derivative(l);
        want += l.ds * x;
        scale += magnitude * l.weight;
      }
      const double got = u.along(kernel);
      return judge(at, got, want, std::abs(got - want), rounding * scale,
                   fmt::format("dL/du of the {} from cpu::attention_backward vs the dense float64 backward", which));
    };
    if constexpr (bias_gradient_testable<E>) {
      const auto& bias = *kernel::bias_part(call.inst);
      const direction u(t.rng, theta);
      auto plus = bias, minus = bias;
      plus.set_parameters(u.moved(theta, +1).data());
      minus.set_parameters(u.moved(theta, -1).data());
      const auto derivative = [&](const auto& l) {
        const std::array<std::int64_t, 1> m{call.position(l.sequence, l.i)}, n{call.position(l.sequence, l.j)};
        const int h = bias.heads() == 1 ? 0 : static_cast<int>(l.head);
        const double x = (plus.bias(h, m, n) - minus.bias(h, m, n)) / (2 * u.step);
        return std::array<double, 2>{x, std::abs(x)};
      };
      if (auto c = compare("bias parameters", grad_bias, u, derivative)) return c;
    }
    if constexpr (has_plane_frequencies<E>) {
      if (spec) {
        const direction u(t.rng, spec->inv_freq);
        const int d = call.d;
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const auto& rotation = rotation_part(call.inst);
        // ∂(q'·k')/∂θ_i = (n − m)(q'_b k'_a − q'_a k'_b) over plane i's channels (a, b): q' = ρ(m)q·scale,
        // k' = κ(n)k, and ρ(m)ᵀ J κ(n) = J ρ(n − m) for a rotation. The kernel counts each token's
        // position from its sequence's first (position_origin::sequence_start): its rounding
        // scales with |m − s| + |n − s| rather than |n − m|.
        const auto derivative = [&](const auto& l) {
          const std::int64_t ti = call.first[l.sequence] + l.i, tj = call.first[l.sequence] + l.j;
          const std::int64_t kh = l.head / (call.heads / call.kv_heads);
          std::vector<double> x(d), qe(d), ke(d);
          for (int c = 0; c < d; ++c) x[c] = scale * static_cast<double>(call.q[(ti * call.heads + l.head) * d + c]);
          const std::int64_t m = call.position(l.sequence, l.i), n = call.position(l.sequence, l.j);
          rotation.encode(false, std::array<std::int64_t, 1>{m}, x.data(), qe.data());
          for (int c = 0; c < d; ++c) x[c] = static_cast<double>(call.k[(tj * call.kv_heads + kh) * d + c]);
          rotation.encode(true, std::array<std::int64_t, 1>{n}, x.data(), ke.data());
          const double from_start = std::abs(static_cast<double>(m - call.position(l.sequence, 0))) +
                                    std::abs(static_cast<double>(n - call.position(l.sequence, 0)));
          double sum = 0, magnitude = 0;
          for (int i = 0; i < static_cast<int>(u.u.size()); ++i) {
            const auto [a, b] = plane_channels(*spec, i);
            sum += u.u[i] * static_cast<double>(n - m) * (qe[b] * ke[a] - qe[a] * ke[b]);
            magnitude += std::abs(u.u[i]) * from_start * (std::abs(qe[b] * ke[a]) + std::abs(qe[a] * ke[b]));
          }
          return std::array<double, 2>{sum, magnitude};
        };
        if (auto c = compare("rotary frequencies", grad_freq, u, derivative)) return c;
      }
    }
    return std::nullopt;
  }
};

/// The gradient laws in report order, after the attention laws.
using gradient_laws = law_list<bias_gradient_law, frequency_gradient_law, attention_gradient_law>;

}  // namespace grape::detail
