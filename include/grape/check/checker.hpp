#pragma once
// grape::check<E>: every law that applies to encoding E, as a rapidcheck property over random
// content, positions, shifts and (unless fixed) parameters. Claimed laws must hold; unclaimed
// ones are reported honestly as holding or not, with a shrunk counterexample.
#include <Eigen/Core>
#include <Eigen/QR>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <random>
#include <rapidcheck.h>
#include <string>
#include <type_traits>
#include <vector>

#include "grape/check/property.hpp"
#include "grape/check/reference.hpp"
#include "grape/check/report.hpp"
#include "grape/detail/describe.hpp"
#include "grape/detail/random.hpp"
#include "grape/encoding.hpp"
#include "grape/inject/score_bias.hpp"

namespace grape {
namespace detail {

inline constexpr double eps64 = std::numeric_limits<double>::epsilon();
inline constexpr double eps32 = std::numeric_limits<float>::epsilon();

template <class E>
constexpr bool has_representation = !std::is_same_v<typename E::representation, no_representation>;

/// What the laws need, read from the instance and the injection rather than from a closed list
/// of injection kinds: an embedding table (shift_linear), a content-dependent bias.
template <class E>
constexpr bool is_embedding = requires(const typename E::instance& i) { i.table; };

template <class E>
constexpr bool has_content_bias = [] {
  if constexpr (requires { typename E::injection::bias_type; })
    return ContentDependentBias<typename E::injection::bias_type>;
  else
    return false;
}();

template <class E>
constexpr bool has_reference_bias = requires(const typename E::params& p) {
  { E::reference_bias(p, 0, std::int64_t{0}, std::int64_t{0}) } -> std::convertible_to<double>;
};

template <class E>
bool law_applies(law l) {
  switch (l) {
    case law::group:
    case law::score_invariance: return true;
    case law::homomorphism:
    case law::relative:
    case law::norm_preservation:
    case law::reference_agreement: return has_representation<E> || has_reference_bias<E>;
    case law::kernel_agreement: return has_representation<E>;
    case law::content_shift_invariance: return has_content_bias<E>;
    case law::shift_linear: return is_embedding<E>;
  }
  return false;
}

using vec = Eigen::VectorXd;

inline vec random_vec(std::mt19937_64& rng, int n) {
  const auto v = normal_vector(rng, n);
  return Eigen::Map<const vec>(v.data(), n);
}

template <std::size_t N>
std::string show(const std::array<std::int64_t, N>& c) {
  std::string s = "(";
  for (std::size_t k = 0; k < N; ++k) s += (k ? ", " : "") + std::to_string(c[k]);
  return s + ")";
}

/// One trial's draws: parameters (fixed or from a shrinkable seed), content seed, positions.
template <class E>
struct trial_inputs {
  using G = typename E::group;
  typename E::params params;
  typename E::instance instance;
  std::mt19937_64 rng;
  int head = 0;

  static std::array<std::int64_t, G::rank> draw_coords(std::int64_t lo, std::int64_t hi) {
    std::array<std::int64_t, G::rank> c{};
    for (auto& x : c) x = *rc::gen::inRange<std::int64_t>(lo, hi);
    return c;
  }
};

template <class E>
trial_inputs<E> draw_trial(const std::optional<typename E::params>& fixed) {
  const auto param_seed = *rc::gen::arbitrary<std::uint64_t>();
  const auto content_seed = *rc::gen::arbitrary<std::uint64_t>();
  std::mt19937_64 prng(param_seed);
  auto params = fixed ? *fixed : E::random_params(prng);
  auto inst = E::make(params);
  const int head = *rc::gen::inRange(0, inst.heads());
  return {std::move(params), std::move(inst), std::mt19937_64(content_seed), head};
}

/// Σ_k |c_k|·‖L_k‖: the size of the exponent, which bounds the reference's own rounding error.
template <class R, std::size_t N>
double angle_size(const R& rep, const std::array<std::int64_t, N>& c) {
  double a = 0;
  for (std::size_t k = 0; k < N; ++k) a += std::abs(static_cast<double>(c[k])) * rep.generator(static_cast<int>(k)).norm();
  return a;
}

inline double double_tolerance(int d, double angle) { return 64.0 * d * eps64 + 1024.0 * eps64 * angle; }
inline double float_tolerance(int d, double angle) { return 16.0 * std::sqrt(static_cast<double>(d)) * eps32 + 1024.0 * eps64 * angle; }

inline const char* double_rule = "|error| <= scale * (64 d eps64 + 1024 eps64 |angle|)";
inline const char* float_rule = "|error| <= scale * (16 sqrt(d) eps32 + 1024 eps64 |angle|)";

template <class E>
std::optional<counterexample> check_group_trial() {
  using G = typename E::group;
  const auto a = G::from_coordinates(trial_inputs<E>::draw_coords(-E::position_limit, E::position_limit));
  const auto b = G::from_coordinates(trial_inputs<E>::draw_coords(-E::position_limit, E::position_limit));
  const auto c = G::from_coordinates(trial_inputs<E>::draw_coords(-E::position_limit, E::position_limit));
  const auto e = G::identity();
  const auto at = fmt::format("a={} b={} c={}", show(G::coordinates(a)), show(G::coordinates(b)), show(G::coordinates(c)));
  auto fail = [&](const char* what) { return counterexample{at, 0, 1, 1, 0, what}; };
  if (!(G::compose(e, a) == a) || !(G::compose(a, e) == a)) return fail("e∘a != a or a∘e != a");
  if (!(G::compose(G::compose(a, b), c) == G::compose(a, G::compose(b, c)))) return fail("(a∘b)∘c != a∘(b∘c)");
  if (!(G::compose(G::inverse(a), a) == e)) return fail("a⁻¹∘a != e");
  return std::nullopt;
}

template <class E>
std::optional<counterexample> check_rep_trial(law which, const std::optional<typename E::params>& fixed) {
  using G = typename E::group;
  auto t = draw_trial<E>(fixed);
  const auto& rep = t.instance.representation(t.head);
  const int d = rep.dim();
  const auto m = G::from_coordinates(trial_inputs<E>::draw_coords(0, E::position_limit));
  const auto n = G::from_coordinates(trial_inputs<E>::draw_coords(0, E::position_limit));
  const auto cm = G::coordinates(m), cn = G::coordinates(n);
  const vec x = random_vec(t.rng, d), y = random_vec(t.rng, d);
  vec u(d), v(d), w(d);
  auto report = [&](std::string at, double lhs, double rhs, double err, double tol, std::string what)
      -> std::optional<counterexample> {
    if (err <= tol) return std::nullopt;
    return counterexample{at + fmt::format(" head={}", t.head), lhs, rhs, err, tol, std::move(what)};
  };
  switch (which) {
    case law::homomorphism: {
      const auto mn = G::compose(m, n);
      rep.apply(G::coordinates(mn), x.data(), u.data());
      rep.apply(cn, x.data(), v.data());
      rep.apply(cm, v.data(), w.data());
      const double err = (u - w).cwiseAbs().maxCoeff();
      const double scale = x.norm() + u.norm();
      const double angle = angle_size(rep, cm) + angle_size(rep, cn);
      return report(fmt::format("a={} b={}", show(cm), show(cn)), u.norm(), w.norm(), err,
                    scale * double_tolerance(d, angle), "|ρ(a∘b)x| vs |ρ(a)ρ(b)x|, error = max |entry difference|");
    }
    case law::relative: {
      const auto offset = G::compose(G::inverse(m), n);
      rep.apply(cm, x.data(), u.data());
      rep.apply_key(cn, y.data(), v.data());
      const double lhs = u.dot(v);
      rep.apply(G::coordinates(G::identity()), x.data(), u.data());
      rep.apply_key(G::coordinates(offset), y.data(), w.data());
      const double rhs = u.dot(w);
      const double scale = x.norm() * y.norm() + std::abs(lhs) + std::abs(rhs);
      const double angle = angle_size(rep, cm) + angle_size(rep, cn);
      return report(fmt::format("m={} n={}", show(cm), show(cn)), lhs, rhs, std::abs(lhs - rhs),
                    scale * double_tolerance(d, angle), "(ρ(m)x)ᵀ(κ(n)y) vs (ρ(e)x)ᵀ(κ(m⁻¹∘n)y)");
    }
    case law::norm_preservation: {
      rep.apply(cm, x.data(), u.data());
      return report(fmt::format("m={}", show(cm)), u.norm(), x.norm(), std::abs(u.norm() - x.norm()),
                    x.norm() * double_tolerance(d, angle_size(rep, cm)), "|ρ(m)x| vs |x|");
    }
    case law::reference_agreement:
    case law::kernel_agreement: {
      const bool is_key = (t.rng() & 1) != 0;
      const vec ref = reference_matrix(rep, cm, is_key) * x;
      double err;
      if (which == law::reference_agreement) {
        if (is_key) rep.apply_key(cm, x.data(), u.data());
        else rep.apply(cm, x.data(), u.data());
        err = (u - ref).cwiseAbs().maxCoeff();
      } else {
        const Eigen::VectorXf xf = x.cast<float>();
        Eigen::VectorXf uf(d);
        if (is_key) rep.apply_key(cm, xf.data(), uf.data());
        else rep.apply(cm, xf.data(), uf.data());
        u = uf.cast<double>();
        err = (u - ref).cwiseAbs().maxCoeff();
      }
      const double scale = x.norm() + ref.norm();
      const double angle = angle_size(rep, cm);
      const double tol = scale * (which == law::reference_agreement ? double_tolerance(d, angle) : float_tolerance(d, angle));
      return report(fmt::format("m={} {}", show(cm), is_key ? "key" : "query"), u.norm(), ref.norm(), err, tol,
                    which == law::reference_agreement ? "|ρ(m)x| (float64 apply) vs |exp(m·L)x|, error = max |entry difference|"
                                                      : "|ρ(m)x| (float32 kernel path) vs |exp(m·L)x|, error = max |entry difference|");
    }
    default: return std::nullopt;
  }
}

template <class E>
std::optional<counterexample> check_score_trial(const std::optional<typename E::params>& fixed) {
  using G = typename E::group;
  auto t = draw_trial<E>(fixed);
  const int d = t.instance.content_dim();
  const auto cm = trial_inputs<E>::draw_coords(0, E::position_limit);
  const auto cn = trial_inputs<E>::draw_coords(0, E::position_limit);
  const auto ct = trial_inputs<E>::draw_coords(0, E::position_limit);
  const auto m = G::from_coordinates(cm), n = G::from_coordinates(cn), s = G::from_coordinates(ct);
  const vec q = random_vec(t.rng, d), k = random_vec(t.rng, d);
  const auto cms = G::coordinates(G::compose(s, m)), cns = G::coordinates(G::compose(s, n));
  const double s1 = t.instance.score(t.head, q.data(), k.data(), G::coordinates(m), G::coordinates(n));
  const double s2 = t.instance.score(t.head, q.data(), k.data(), cms, cns);
  if (s1 == s2) return std::nullopt;  // equal, including both masked (−∞)
  double angle = 0;
  if constexpr (has_representation<E>) {
    const auto& rep = t.instance.representation(t.head);
    angle = angle_size(rep, cms) + angle_size(rep, cns);
  }
  const double tol = (q.norm() * k.norm() + std::abs(s1) + std::abs(s2)) * double_tolerance(d, angle);
  const double err = std::abs(s1 - s2);
  if (err <= tol) return std::nullopt;
  return counterexample{fmt::format("m={} n={} t={} head={}", show(G::coordinates(m)), show(G::coordinates(n)), show(ct), t.head),
                        s1, s2, err, tol, "score(q,k,m,n) vs score(q,k,t∘m,t∘n), content fixed"};
}

template <class E>
std::optional<counterexample> check_content_shift_trial(const std::optional<typename E::params>& fixed) {
  auto t = draw_trial<E>(fixed);
  const std::int64_t m = *rc::gen::inRange<std::int64_t>(0, E::position_limit);
  const std::int64_t n = *rc::gen::inRange<std::int64_t>(0, E::position_limit);
  const std::int64_t s = *rc::gen::inRange<std::int64_t>(0, E::position_limit);
  const auto& b = t.instance.bias;
  const double s1 = b.bias_with_content(t.head, m, n, 0);
  const double s2 = b.bias_with_content(t.head, m + s, n + s, s);
  if (s1 == s2) return std::nullopt;
  const double tol = (1.0 + std::abs(s1) + std::abs(s2)) * 64 * eps64 * (1 + std::abs(static_cast<double>(m - n)));
  if (std::abs(s1 - s2) <= tol) return std::nullopt;
  return counterexample{fmt::format("m=({}) n=({}) t=({}) head={}", m, n, s, t.head), s1, s2, std::abs(s1 - s2), tol,
                        "bias(m,n) vs bias(m+t,n+t) with the content moved by t"};
}

/// A score bias against the encoding's independent float64 reference (check/bias_reference.hpp).
template <class E>
std::optional<counterexample> check_bias_reference_trial(const std::optional<typename E::params>& fixed) {
  auto t = draw_trial<E>(fixed);
  const std::int64_t m = *rc::gen::inRange<std::int64_t>(0, E::position_limit);
  const std::int64_t n = *rc::gen::inRange<std::int64_t>(0, E::position_limit);
  const double got = t.instance.bias.bias(t.head, std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n});
  const double want = E::reference_bias(t.params, t.head, m, n);
  if (got == want) return std::nullopt;
  const double err = std::abs(got - want);
  const double tol = 64 * eps64 * (1.0 + std::abs(want)) * (1.0 + std::abs(static_cast<double>(m - n)));
  if (err <= tol) return std::nullopt;
  return counterexample{fmt::format("m=({}) n=({}) head={}", m, n, t.head), got, want, err, tol,
                        "bias(m,n) vs the reference formula"};
}

/// PE(m + k) = M_k·PE(m): M_k is fitted by least squares on 2·dim random positions, then tested at
/// a fresh position. A table with no linear shift operator leaves a large residual there.
template <class E>
std::optional<counterexample> check_shift_linear_trial(const std::optional<typename E::params>& fixed) {
  auto t = draw_trial<E>(fixed);
  const auto& table = t.instance.table;
  const int d = table.dim();
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(1, E::position_limit);
  const std::int64_t m = *rc::gen::inRange<std::int64_t>(0, E::position_limit);
  auto pe = [&](std::int64_t p) {
    vec v(d);
    table.embed(std::array<std::int64_t, 1>{p}, v.data());
    return v;
  };
  Eigen::MatrixXd A(d, 2 * d), B(d, 2 * d);
  std::uniform_int_distribution<std::int64_t> pos(0, E::position_limit - 1);
  for (int j = 0; j < 2 * d; ++j) {
    const std::int64_t p = pos(t.rng);
    A.col(j) = pe(p);
    B.col(j) = pe(p + k);
  }
  const Eigen::MatrixXd M = A.transpose().colPivHouseholderQr().solve(B.transpose()).transpose();
  const vec lhs = pe(m + k), rhs = M * pe(m);
  const double err = (lhs - rhs).cwiseAbs().maxCoeff();
  const double tol = 1e-6 * (1.0 + lhs.norm());
  if (err <= tol) return std::nullopt;
  return counterexample{fmt::format("m=({}) k=({})", m, k), lhs.norm(), rhs.norm(), err, tol,
                        "|PE(m+k)| vs |M_k PE(m)| (M_k fitted on other positions), error = max |entry difference|"};
}

template <class E>
law_result check_law(law which, const std::optional<typename E::params>& fixed, const check_options& options) {
  const bool claimed = E::claims.contains(which);
  switch (which) {
    case law::group:
      return run_law(identity_of(which), claimed, options, "exact equality", [] { return check_group_trial<E>(); });
    case law::score_invariance:
      return run_law(identity_of(which), claimed, options, double_rule, [&] { return check_score_trial<E>(fixed); });
    case law::kernel_agreement:
      if constexpr (has_representation<E>)
        return run_law(identity_of(which), claimed, options, float_rule, [&] { return check_rep_trial<E>(which, fixed); });
      break;
    case law::reference_agreement:
      if constexpr (!has_representation<E> && has_reference_bias<E>)
        return run_law(identity_of(which), claimed, options, "|error| <= 64 eps64 (1 + |b|)(1 + |m - n|)",
                       [&] { return check_bias_reference_trial<E>(fixed); });
      [[fallthrough]];
    case law::homomorphism:
    case law::relative:
    case law::norm_preservation:
      if constexpr (has_representation<E>)
        return run_law(identity_of(which), claimed, options, double_rule, [&] { return check_rep_trial<E>(which, fixed); });
      break;
    case law::content_shift_invariance:
      if constexpr (has_content_bias<E>)
        return run_law(identity_of(which), claimed, options, "|error| <= 64 eps64 (1 + |s1| + |s2|)(1 + |m - n|)",
                       [&] { return check_content_shift_trial<E>(fixed); });
      break;
    case law::shift_linear:
      if constexpr (is_embedding<E>)
        return run_law(identity_of(which), claimed, options, "|error| <= 1e-6 (1 + |PE(m+k)|)",
                       [&] { return check_shift_linear_trial<E>(fixed); });
      break;
  }
  return {};
}

/// A law of your own (laws.hpp: law_list): a name, a formula, a stated tolerance and a trial.
template <class L, class E>
concept LawTester = requires(trial_inputs<E>& t) {
  { L::name } -> std::convertible_to<std::string_view>;
  { L::formula } -> std::convertible_to<std::string_view>;
  { L::tolerance } -> std::convertible_to<std::string_view>;
  { L::template trial<E>(t) } -> std::same_as<std::optional<counterexample>>;
};

template <class E>
struct extra_laws_of {
  using type = law_list<>;
};
template <class E>
  requires requires { typename E::extra_laws; }
struct extra_laws_of<E> {
  using type = typename E::extra_laws;
};

/// Runs each law tester E lists (claimed by being listed).
template <class E, class... Laws>
void check_extra_laws(law_list<Laws...>, const std::optional<typename E::params>& fixed,
                      const check_options& options, std::vector<law_result>& rows) {
  static_assert((LawTester<Laws, E> && ...),
                "grape: an entry of extra_laws is not a law tester: give it static name, formula and "
                "tolerance strings and `template <class E> static std::optional<counterexample> "
                "trial(detail::trial_inputs<E>&)`");
  (rows.push_back(run_law(identity_of(Laws::name, Laws::formula), /*claimed=*/true, options,
                          std::string(Laws::tolerance), [&] {
                            auto t = draw_trial<E>(fixed);
                            return Laws::template trial<E>(t);
                          })),
   ...);
}

}  // namespace detail

/// Checks every law that applies to E. With params, they are fixed; without, drawn per trial.
template <class E>
check_report check(const std::optional<typename E::params>& fixed, const check_options& options = {}) {
  static_assert(Encoding<E>,
                "grape: check<E> needs an Encoding: derive E from grape::encoding<G, R, I> and give it name, "
                "summary, claims, params, make(params), random_params(rng)");
  if (fixed) (void)E::make(*fixed);  // bad parameters: input_error before any trial runs
  check_report report;
  report.encoding = std::string(E::name);
  report.summary = std::string(E::summary);
  report.parameters = fixed ? "fixed: " + detail::describe_params(*fixed) : "random per trial";
  report.options = options;
  for (law l : all_laws) {
    if (!detail::law_applies<E>(l)) continue;
    if (!E::claims.contains(l) && l == law::kernel_agreement && !E::claims.contains(law::reference_agreement)) continue;
    report.laws.push_back(detail::check_law<E>(l, fixed, options));
  }
  detail::check_extra_laws<E>(typename detail::extra_laws_of<E>::type{}, fixed, options, report.laws);
  return report;
}

template <class E>
check_report check(const typename E::params& params, const check_options& options = {}) {
  return check<E>(std::optional<typename E::params>(params), options);
}

template <class E>
check_report check(const check_options& options = {}) {
  return check<E>(std::optional<typename E::params>(), options);
}

}  // namespace grape
