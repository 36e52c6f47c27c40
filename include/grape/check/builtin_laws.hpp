#pragma once
// The built-in laws as law testers, the same kind of type as a law of one's own (LawTester,
// check/checker.hpp): name, formula, tolerance and a trial over one trial's inputs. Each also
// names the law it checks (`id`: an encoding's `claims` say whether it must hold) and says
// whether it applies to an encoding at all (`applies<E>`). grape::check<E> runs `builtin_laws`,
// then E's extra_laws, through one runner.
#include <Eigen/Core>
#include <Eigen/QR>
#include <array>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <random>
#include <rapidcheck.h>
#include <string>
#include <string_view>
#include <utility>

#include "grape/check/reference.hpp"
#include "grape/check/report.hpp"
#include "grape/check/trial.hpp"

namespace grape::detail {

/// A law's verdict on one trial: a counterexample when the error exceeds the tolerance, and
/// whenever a value is not finite — an overflow must fail with its own message rather than pass
/// because its tolerance, proportional to a norm, became infinite too.
inline std::optional<counterexample> judge(std::string at, double lhs, double rhs, double err, double tol,
                                           std::string what) {
  if (!std::isfinite(lhs) || !std::isfinite(rhs) || !std::isfinite(err) || !std::isfinite(tol))
    return counterexample{std::move(at), lhs, rhs, err, tol, "a value is not finite: " + what};
  if (err <= tol) return std::nullopt;
  return counterexample{std::move(at), lhs, rhs, err, tol, std::move(what)};
}

/// Two scores that are the same value: equal and finite, or both masked (−∞). Two infinities
/// of the same sign are an overflow, not agreement.
inline bool same_score(double a, double b) {
  return a == b && (std::isfinite(a) || a == -std::numeric_limits<double>::infinity());
}

/// The entry where two vectors differ most, or the first whose difference is not finite: a
/// counterexample prints the two values there, so that its sides differ by its error (not two
/// norms that may agree while the vectors do not), and judge sees any NaN or infinity.
inline int worst_entry(const vec& a, const vec& b) {
  int worst = 0;
  for (int j = 0; j < a.size(); ++j) {
    const double e = std::abs(a[j] - b[j]);
    if (!std::isfinite(e)) return j;
    if (e > std::abs(a[worst] - b[worst])) worst = j;
  }
  return worst;
}

/// What every built-in tester states about its law, as laws.hpp names and writes it.
template <law L>
struct builtin_law {
  static constexpr law id = L;
  static constexpr std::string_view name = to_string(L);
  static constexpr std::string_view formula = grape::formula(L);
};

struct group_law : builtin_law<law::group> {
  static constexpr std::string_view tolerance = "exact equality";
  template <class E>
  static constexpr bool applies = true;

  /// Draws its own elements: the group law needs nothing of the instance.
  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    using G = typename E::group;
    const auto a = G::from_coordinates(t.draw_positions());
    const auto b = G::from_coordinates(t.draw_positions());
    const auto c = G::from_coordinates(t.draw_positions());
    const auto e = G::identity();
    const auto at = fmt::format("a={} b={} c={}", show(G::coordinates(a)), show(G::coordinates(b)), show(G::coordinates(c)));
    auto fail = [&](const char* what) { return counterexample{at, 0, 1, 1, 0, what}; };
    if (!(G::compose(e, a) == a) || !(G::compose(a, e) == a)) return fail("e∘a != a or a∘e != a");
    if (!(G::compose(G::compose(a, b), c) == G::compose(a, G::compose(b, c)))) return fail("(a∘b)∘c != a∘(b∘c)");
    if (!(G::compose(G::inverse(a), a) == e)) return fail("a⁻¹∘a != e");
    return std::nullopt;
  }
};

/// The representation laws' common draws, always in this order (positions m and n, then content
/// x and y) so that each law sees the same inputs for a seed whichever of them it uses.
template <class E>
struct rep_draws {
  using G = typename E::group;
  int head;
  typename G::element m, n;
  coordinates_t<G> cm, cn;
  vec x, y;

  rep_draws(trial_inputs<E>& t, int d)
      : head(t.head),
        m(G::from_coordinates(t.draw_positions())),
        n(G::from_coordinates(t.draw_positions())),
        cm(G::coordinates(m)),
        cn(G::coordinates(n)),
        x(random_vec(t.rng, d)),
        y(random_vec(t.rng, d)) {}

  /// A counterexample at `at` (and the head) when err exceeds tol.
  std::optional<counterexample> verdict(std::string at, double lhs, double rhs, double err, double tol,
                                        std::string what) const {
    return judge(at + fmt::format(" head={}", head), lhs, rhs, err, tol, std::move(what));
  }
};

struct homomorphism_law : builtin_law<law::homomorphism> {
  static constexpr std::string_view tolerance = double_rule;
  template <class E>
  static constexpr bool applies = has_representation<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    using G = typename E::group;
    const auto& rep = t.instance.representation(t.head);
    const int d = rep.dim();
    const rep_draws<E> r(t, d);
    vec u(d), v(d), w(d);
    rep.apply(G::coordinates(G::compose(r.m, r.n)), r.x.data(), u.data());
    rep.apply(r.cn, r.x.data(), v.data());
    rep.apply(r.cm, v.data(), w.data());
    const int j = worst_entry(u, w);
    const double scale = r.x.norm() + u.norm();
    const double angle = angle_size(rep, r.cm) + angle_size(rep, r.cn);
    return r.verdict(fmt::format("a={} b={}", show(r.cm), show(r.cn)), u[j], w[j], std::abs(u[j] - w[j]),
                     scale * double_tolerance(d, angle), fmt::format("(ρ(a∘b)x)[{0}] vs (ρ(a)ρ(b)x)[{0}]", j));
  }
};

struct relative_law : builtin_law<law::relative> {
  static constexpr std::string_view tolerance = double_rule;
  template <class E>
  static constexpr bool applies = has_representation<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    using G = typename E::group;
    const auto& rep = t.instance.representation(t.head);
    const int d = rep.dim();
    const rep_draws<E> r(t, d);
    vec u(d), v(d), w(d);
    rep.apply(r.cm, r.x.data(), u.data());
    rep.apply_key(r.cn, r.y.data(), v.data());
    const double lhs = u.dot(v);
    rep.apply(G::coordinates(G::identity()), r.x.data(), u.data());
    rep.apply_key(G::coordinates(G::compose(G::inverse(r.m), r.n)), r.y.data(), w.data());
    const double rhs = u.dot(w);
    const double scale = r.x.norm() * r.y.norm() + std::abs(lhs) + std::abs(rhs);
    const double angle = angle_size(rep, r.cm) + angle_size(rep, r.cn);
    return r.verdict(fmt::format("m={} n={}", show(r.cm), show(r.cn)), lhs, rhs, std::abs(lhs - rhs),
                     scale * double_tolerance(d, angle), "(ρ(m)x)ᵀ(κ(n)y) vs (ρ(e)x)ᵀ(κ(m⁻¹∘n)y)");
  }
};

struct score_invariance_law : builtin_law<law::score_invariance> {
  static constexpr std::string_view tolerance = double_rule;
  template <class E>
  static constexpr bool applies = true;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    using G = typename E::group;
    const int d = t.instance.content_dim();
    const auto cm = t.draw_positions();
    const auto cn = t.draw_positions();
    const auto ct = t.draw_positions();
    const auto m = G::from_coordinates(cm), n = G::from_coordinates(cn), s = G::from_coordinates(ct);
    const vec q = random_vec(t.rng, d), k = random_vec(t.rng, d);
    const auto cms = G::coordinates(G::compose(s, m)), cns = G::coordinates(G::compose(s, n));
    const double s1 = t.instance.score(t.head, q.data(), k.data(), G::coordinates(m), G::coordinates(n));
    const double s2 = t.instance.score(t.head, q.data(), k.data(), cms, cns);
    if (same_score(s1, s2)) return std::nullopt;  // equal, including both masked (−∞)
    double angle = 0;
    if constexpr (has_representation<E>) {
      const auto& rep = t.instance.representation(t.head);
      angle = angle_size(rep, cms) + angle_size(rep, cns);
    }
    const double tol = (q.norm() * k.norm() + std::abs(s1) + std::abs(s2)) * double_tolerance(d, angle);
    return judge(fmt::format("m={} n={} t={} head={}", show(G::coordinates(m)), show(G::coordinates(n)), show(ct), t.head),
                 s1, s2, std::abs(s1 - s2), tol, "score(q,k,m,n) vs score(q,k,t∘m,t∘n), content fixed");
  }
};

struct content_shift_invariance_law : builtin_law<law::content_shift_invariance> {
  static constexpr std::string_view tolerance = "|error| <= 64 eps64 (1 + |s1| + |s2|)(1 + |m - n|)";
  template <class E>
  static constexpr bool applies = has_content_bias<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    // n before m: rapidcheck never shrinks a pick again once a later one has shrunk, and a causal
    // bias fails only for n <= m, so an m drawn first would stay pinned near the first n.
    const std::int64_t n = t.draw_position();
    const std::int64_t m = t.draw_position();
    const std::int64_t s = t.draw_position();
    const auto& b = t.instance.bias;
    const double s1 = b.bias_with_content(t.head, m, n, 0);
    const double s2 = b.bias_with_content(t.head, m + s, n + s, s);
    if (same_score(s1, s2)) return std::nullopt;
    const double tol = (1.0 + std::abs(s1) + std::abs(s2)) * 64 * eps64 * (1 + std::abs(static_cast<double>(m - n)));
    return judge(fmt::format("m=({}) n=({}) t=({}) head={}", m, n, s, t.head), s1, s2, std::abs(s1 - s2), tol,
                 "bias(m,n) vs bias(m+t,n+t) with the content moved by t");
  }
};

struct norm_preservation_law : builtin_law<law::norm_preservation> {
  static constexpr std::string_view tolerance = double_rule;
  template <class E>
  static constexpr bool applies = has_representation<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const auto& rep = t.instance.representation(t.head);
    const int d = rep.dim();
    const rep_draws<E> r(t, d);
    vec u(d);
    rep.apply(r.cm, r.x.data(), u.data());
    return r.verdict(fmt::format("m={}", show(r.cm)), u.norm(), r.x.norm(), std::abs(u.norm() - r.x.norm()),
                     r.x.norm() * double_tolerance(d, angle_size(rep, r.cm)), "|ρ(m)x| vs |x|");
  }
};

/// ρ(m)x computed in T (float64 apply, or float32: the element code the kernels run) against the
/// dense float64 exponential, on the query or the key side.
template <class T, class E>
std::optional<counterexample> apply_vs_exponential(trial_inputs<E>& t, double (*tolerance)(int, double),
                                                   const char* what) {
  const auto& rep = t.instance.representation(t.head);
  const int d = rep.dim();
  const rep_draws<E> r(t, d);
  const bool is_key = (t.rng() & 1) != 0;
  const vec ref = reference_matrix(rep, r.cm, is_key) * r.x;
  using vec_t = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  const vec_t x = r.x.template cast<T>();
  vec_t u(d);
  if (is_key) rep.apply_key(r.cm, x.data(), u.data());
  else rep.apply(r.cm, x.data(), u.data());
  const vec u64 = u.template cast<double>();
  const int j = worst_entry(u64, ref);
  const double scale = r.x.norm() + ref.norm();
  return r.verdict(fmt::format("m={} {}", show(r.cm), is_key ? "key" : "query"), u64[j], ref[j],
                   std::abs(u64[j] - ref[j]), scale * tolerance(d, angle_size(rep, r.cm)),
                   fmt::format(fmt::runtime(what), j));
}

/// reference_agreement for a representation. A score bias has its own tester below; the two
/// apply to disjoint encodings, so each encoding gets one reference_agreement row.
struct reference_agreement_law : builtin_law<law::reference_agreement> {
  static constexpr std::string_view tolerance = double_rule;
  template <class E>
  static constexpr bool applies = has_representation<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    return apply_vs_exponential<double>(t, double_tolerance, "(ρ(m)x)[{0}] (float64 apply) vs (exp(m·L)x)[{0}]");
  }
};

/// reference_agreement for a score bias: against the encoding's independent float64 reference
/// (check/bias_reference.hpp).
struct bias_reference_law : builtin_law<law::reference_agreement> {
  static constexpr std::string_view tolerance = "|error| <= 64 eps64 (1 + |b|)(1 + |m - n|)";
  template <class E>
  static constexpr bool applies = !has_representation<E> && has_reference_bias<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const std::int64_t m = t.draw_position();
    const std::int64_t n = t.draw_position();
    const double got = t.instance.bias.bias(t.head, std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n});
    const double want = E::reference_bias(t.params, t.head, m, n);
    if (same_score(got, want)) return std::nullopt;
    const double tol = 64 * eps64 * (1.0 + std::abs(want)) * (1.0 + std::abs(static_cast<double>(m - n)));
    return judge(fmt::format("m=({}) n=({}) head={}", m, n, t.head), got, want, std::abs(got - want), tol,
                 "bias(m,n) vs the reference formula");
  }
};

struct float32_agreement_law : builtin_law<law::float32_agreement> {
  static constexpr std::string_view tolerance = float_rule;
  /// Only for an encoding that claims an agreement law: a representation used otherwise (the
  /// sinusoidal table is RoPE's ρ(m) applied to a fixed vector) is not run by the kernels.
  template <class E>
  static constexpr bool applies = has_representation<E> && (E::claims.contains(law::float32_agreement) ||
                                                             E::claims.contains(law::reference_agreement));

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    return apply_vs_exponential<float>(t, float_tolerance, "(ρ(m)x)[{0}] (float32 kernel path) vs (exp(m·L)x)[{0}]");
  }
};

/// PE(m + k) = M_k·PE(m): M_k is fitted by least squares on 2·dim random positions, then tested at
/// a fresh position. A table with no linear shift operator leaves a large residual there.
struct shift_linear_law : builtin_law<law::shift_linear> {
  static constexpr std::string_view tolerance = "|error| <= 1e-6 (1 + |PE(m+k)|)";
  template <class E>
  static constexpr bool applies = is_embedding<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const auto& table = t.instance.table;
    const int d = table.dim();
    const std::int64_t k = std::max<std::int64_t>(1, std::abs(t.draw_position()));
    const std::int64_t m = t.draw_position();
    auto pe = [&](std::int64_t p) {
      vec v(d);
      table.embed(std::array<std::int64_t, 1>{p}, v.data());
      return v;
    };
    Eigen::MatrixXd A(d, 2 * d), B(d, 2 * d);
    std::uniform_int_distribution<std::int64_t> pos(E::signed_positions ? 1 - t.limit : 0, t.limit - 1);
    for (int j = 0; j < 2 * d; ++j) {
      const std::int64_t p = pos(t.rng);
      A.col(j) = pe(p);
      B.col(j) = pe(p + k);
    }
    const Eigen::MatrixXd M = A.transpose().colPivHouseholderQr().solve(B.transpose()).transpose();
    const vec lhs = pe(m + k), rhs = M * pe(m);
    const int j = worst_entry(lhs, rhs);
    const double tol = 1e-6 * (1.0 + lhs.norm());
    return judge(fmt::format("m=({}) k=({})", m, k), lhs[j], rhs[j], std::abs(lhs[j] - rhs[j]), tol,
                 fmt::format("PE(m+k)[{0}] vs (M_k PE(m))[{0}] (M_k fitted on other positions)", j));
  }
};

/// The built-in laws in report order (laws.hpp's all_laws).
using builtin_laws = law_list<group_law, homomorphism_law, relative_law, score_invariance_law,
                              content_shift_invariance_law, norm_preservation_law, reference_agreement_law,
                              bias_reference_law, float32_agreement_law, shift_linear_law>;

}  // namespace grape::detail
