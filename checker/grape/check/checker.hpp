#pragma once
// grape::check<E>: every law that applies to encoding E, as a rapidcheck property over random
// content, positions, shifts and (unless fixed) parameters. Claimed laws must hold; unclaimed
// ones are reported honestly as holding or not, with a shrunk counterexample.
#include <fmt/ranges.h>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "grape/check/builtin_laws.hpp"
#include "grape/check/attention_laws.hpp"
#include "grape/check/gradient_laws.hpp"
#include "grape/check/kernel_laws.hpp"
#include "grape/check/property.hpp"
#include "grape/check/report.hpp"
#include "grape/check/trial.hpp"
#include "grape/detail/describe.hpp"
#include "grape/encoding.hpp"

namespace grape {
namespace detail {

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

template <class... A, class... B>
constexpr law_list<A..., B...> join(law_list<A...>, law_list<B...>) {
  return {};
}

/// One tester's row, if it applies to E (`applies<E>`, when the tester says), or a row saying why
/// it did not run (`not_run<E>`: a reason, when the tester's kernel would take E's kind but E
/// lacks what it needs). A built-in tester
/// names its law (`id`): E's claims say whether it must hold, and the seed offset is the law's.
/// A kernel law or a law of one's own is claimed by running (or as its `claimed<E>` says), and takes
/// its seed offset from its name.
template <class E, class L>
void run_tester(const std::optional<typename E::params>& fixed, const check_options& options,
                std::vector<law_result>& rows) {
  constexpr bool builtin = requires { L::id; };
  constexpr bool applies = [] {
    if constexpr (requires { L::template applies<E>; }) return L::template applies<E>;
    else return true;
  }();
  constexpr std::string_view not_run = [] {
    if constexpr (requires { L::template not_run<E>; }) return std::string_view(L::template not_run<E>);
    else return std::string_view();
  }();
  if constexpr (!applies && !not_run.empty()) {
    law_result r;
    r.name = std::string(L::name);
    r.formula = std::string(L::formula);
    r.status = law_status::not_run;
    r.why_not_run = std::string(not_run);
    rows.push_back(std::move(r));
  }
  if constexpr (applies) {
    auto trial = [&] {
      auto t = draw_trial<E>(fixed, options);
      return L::template trial<E>(t);
    };
    const std::string tolerance(L::tolerance);
    if constexpr (builtin)
      rows.push_back(run_law(identity_of(L::id), E::claims.contains(L::id), options, tolerance, trial));
    else if constexpr (requires { L::template claimed<E>; })
      rows.push_back(run_law(identity_of(L::name, L::formula), L::template claimed<E>, options, tolerance, trial));
    else
      rows.push_back(run_law(identity_of(L::name, L::formula), /*claimed=*/true, options, tolerance, trial));
  }
}

/// Runs law testers in order, one row each: grape::check<E> passes the built-ins, the kernel laws,
/// the attention and gradient laws, then E's extra_laws.
template <class E, class... Laws>
void run_laws(law_list<Laws...>, const std::optional<typename E::params>& fixed, const check_options& options,
              std::vector<law_result>& rows) {
  // Built-in testers satisfy it too; only an extra_laws entry can fail it.
  static_assert((LawTester<Laws, E> && ...),
                "grape: an entry of extra_laws is not a law tester: give it static name, formula and "
                "tolerance strings and `template <class E> static std::optional<counterexample> "
                "trial(detail::trial_inputs<E>&)`");
  (run_tester<E, Laws>(fixed, options, rows), ...);
}

/// What the encoding is compared with besides itself: a representation's dense exponential of
/// its generators, a bias's reference_bias formula — or nothing, which the report shows.
template <class E>
std::string reference_of() {
  std::vector<std::string> refs;
  if constexpr (has_representation<E>) refs.emplace_back("exp(Σ c_k L_k) of its generators, dense float64");
  if constexpr (has_reference_bias<E>) refs.emplace_back("reference_bias, its independent bias formula");
  if (refs.empty()) return "none (only its own laws; a score bias can give reference_bias)";
  return fmt::format("{}", fmt::join(refs, "; "));
}

/// What one instance says about itself that a user may not mean (skew_generators dropping the
/// symmetric part of a generator it was given).
template <class E>
std::vector<std::string> notes_on(const typename E::instance& inst) {
  std::vector<std::string> notes;
  if constexpr (has_representation<E>) {
    for (int h = 0; h < inst.heads(); ++h) {
      const auto& rep = inst.representation(h);
      if constexpr (requires { rep.symmetric_part(); }) {
        if (const double s = rep.symmetric_part(); s > 0) {
          notes.push_back(fmt::format(
              "head {}: a generator has a symmetric part (norm {:.3g}); skew_generators applies only its skew "
              "part (L - Lᵀ)/2, so exp(tL) is not what the kernels compute",
              h, s));
          break;
        }
      }
    }
  }
  return notes;
}

}  // namespace detail

/// Checks every law that applies to E. With params, they are fixed; without, drawn per trial.
template <class E>
check_report check(const std::optional<typename E::params>& fixed, const check_options& options = {}) {
  static_assert(Encoding<E>,
                "grape: check<E> needs an Encoding: derive E from grape::encoding<G, R, I> and give it name, "
                "summary, claims, params, make(params), random_params(rng)");
  static_assert(!detail::bias_gives_gradient<E> || detail::bias_gradient_testable<E>,
                "grape: a bias that gives a parameter gradient also gives parameters(out) and set_parameters(p) "
                "(BiasWithParameters, grape/inject/score_bias.hpp), so that the checker can test the gradient");
  // Bad parameters: input_error before any trial runs. Unfixed, one draw from the seed stands for
  // the rest in the report's notes.
  std::mt19937_64 rng(options.seed);
  const auto first = E::make(fixed ? *fixed : E::random_params(rng));
  check_report report;
  report.encoding = std::string(E::name);
  report.summary = std::string(E::summary);
  report.parameters = fixed ? "fixed: " + detail::describe_params(*fixed) : "random per trial";
  report.options = options;
  report.reference = detail::reference_of<E>();
  report.notes = detail::notes_on<E>(first);
  const std::int64_t range = detail::position_range<E>(options);
  report.positions = fmt::format("{}..{}", E::signed_positions ? 1 - range : 0, range - 1);
  report.position_draws = std::string(detail::position_draws_note);
  if (range < E::position_limit)
    report.position_note = fmt::format("narrowed by max_position from the encoding's {}", E::position_limit - 1);
  else if constexpr (requires { E::position_limit_reason; })
    report.position_note = std::string(E::position_limit_reason);
  detail::run_laws<E>(
      detail::join(detail::join(detail::join(detail::join(detail::builtin_laws{}, detail::kernel_laws{}),
                                             detail::attention_laws{}),
                                detail::gradient_laws{}),
                   typename detail::extra_laws_of<E>::type{}),
      fixed, options, report.laws);
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
