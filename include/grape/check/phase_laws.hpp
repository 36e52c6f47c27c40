#pragma once
// Laws of a rotation by per-token real phases (inject/rotate_by_phase.hpp, contextual GRAPE-M):
// the group is the real line of phases, so the checker draws real shifts and real phase pairs
// rather than integer positions. Light (no Eigen): the encoding header names them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "grape/check/report.hpp"
#include "grape/detail/random_draws.hpp"

namespace grape {
namespace detail {

/// A real shift of either sign up to about 10^6: a drawn position (which rapidcheck shrinks toward
/// 0) plus a uniform fraction, scaled by 2^e, e in [0, 12], sign and fraction from the trial's rng.
template <class T>
double draw_real_shift(T& t) {
  const double whole = static_cast<double>(t.draw_position());
  const double fraction = std::uniform_real_distribution<double>(0.0, 1.0)(t.rng);
  const int e = std::uniform_int_distribution<int>(0, 12)(t.rng);
  const double sign = (t.rng() & 1) ? -1.0 : 1.0;
  return sign * std::ldexp(whole + fraction, e);
}

/// The float64 tolerance of one phase-rotated logit: 64 ε |q||k| per plane, plus ε per radian of
/// every angle formed (|φ|·max θ, each side).
template <class I>
double phase_tolerance(const I& inst, int h, double qk_norms, std::initializer_list<double> phases) {
  constexpr double eps = std::numeric_limits<double>::epsilon();
  double theta_max = 0;
  for (int j = 0; j < inst.planes(); ++j) theta_max = std::max(theta_max, std::abs(inst.theta(h, j)));
  double angles = 0;
  for (double p : phases) angles += std::abs(p) * theta_max;
  return qk_norms * eps * (64.0 * inst.head_dim + 16.0 * (1.0 + angles));
}

inline double norm(const std::vector<double>& v) {
  return std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0));
}

}  // namespace detail

/// Moving every phase by one real c leaves every logit unchanged: the relative law in R.
struct phase_shift_invariance_law {
  static constexpr std::string_view name = "phase_shift_invariance";
  static constexpr std::string_view formula = "score(q,k; Phi_m + c, Phi_n + c) = score(q,k; Phi_m, Phi_n), c real";
  static constexpr std::string_view tolerance = "|error| <= |q||k| eps64 (64 d + 16 (1 + sum |phi| max theta))";

  template <class E>
  static std::optional<counterexample> trial(detail::trial_inputs<E>& t) {
    const std::int64_t n = t.draw_position(), m = t.draw_position();
    const double c = detail::draw_real_shift(t);
    const auto& inst = t.instance;
    const auto q = detail::normal_vector(t.rng, inst.content_dim()), k = detail::normal_vector(t.rng, inst.content_dim());
    const double pm = inst.phase(t.head, m), pn = inst.phase(t.head, n);
    const double s1 = inst.score_at_phases(t.head, q.data(), k.data(), pm, pn);
    const double s2 = inst.score_at_phases(t.head, q.data(), k.data(), pm + c, pn + c);
    const double tol = detail::phase_tolerance(inst, t.head, detail::norm(q) * detail::norm(k), {pm, pn, pm + c, pn + c});
    if (std::abs(s1 - s2) <= tol) return std::nullopt;
    return counterexample{fmt::format("m=({}) n=({}) c={} head={}", m, n, c, t.head), s1, s2, std::abs(s1 - s2), tol,
                          "score(Phi_m, Phi_n) vs score(Phi_m + c, Phi_n + c)"};
  }
};

/// The logit of tokens m and n equals that of phases 0 and Φ_n − Φ_m: it depends on the difference alone.
struct phase_difference_law {
  static constexpr std::string_view name = "phase_difference";
  static constexpr std::string_view formula = "score(q,k; Phi_m, Phi_n) = score(q,k; 0, Phi_n - Phi_m)";
  static constexpr std::string_view tolerance = phase_shift_invariance_law::tolerance;

  template <class E>
  static std::optional<counterexample> trial(detail::trial_inputs<E>& t) {
    const std::int64_t n = t.draw_position(), m = t.draw_position();
    const auto& inst = t.instance;
    const auto q = detail::normal_vector(t.rng, inst.content_dim()), k = detail::normal_vector(t.rng, inst.content_dim());
    const double pm = inst.phase(t.head, m), pn = inst.phase(t.head, n);
    const double s1 = inst.score(t.head, q.data(), k.data(), std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n});
    const double s2 = inst.score_at_phases(t.head, q.data(), k.data(), 0.0, pn - pm);
    const double tol = detail::phase_tolerance(inst, t.head, detail::norm(q) * detail::norm(k), {pm, pn, pn - pm});
    if (std::abs(s1 - s2) <= tol) return std::nullopt;
    return counterexample{fmt::format("m=({}) n=({}) head={}", m, n, t.head), s1, s2, std::abs(s1 - s2), tol,
                          "score(Phi_m, Phi_n) vs score(0, Phi_n - Phi_m)"};
  }
};

}  // namespace grape
