#pragma once
// grape::check<E>: every law that applies to encoding E, as a rapidcheck property over random
// content, positions, shifts and (unless fixed) parameters. Claimed laws must hold; unclaimed
// ones are reported honestly as holding or not, with a shrunk counterexample.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grape/check/builtin_laws.hpp"
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

/// One tester's row, if it applies to E. A built-in tester names its law (`id`): E's claims say
/// whether it must hold, `applies<E>` whether it runs, and the seed offset is the law's. A law of
/// one's own is claimed by being listed, always runs, and takes its seed offset from its name.
template <class E, class L>
void run_tester(const std::optional<typename E::params>& fixed, const check_options& options,
                std::vector<law_result>& rows) {
  constexpr bool builtin = requires { L::id; };
  constexpr bool applies = [] {
    if constexpr (builtin) return L::template applies<E>;
    else return true;
  }();
  if constexpr (applies) {
    auto trial = [&] {
      auto t = draw_trial<E>(fixed);
      return L::template trial<E>(t);
    };
    const std::string tolerance(L::tolerance);
    if constexpr (builtin)
      rows.push_back(run_law(identity_of(L::id), E::claims.contains(L::id), options, tolerance, trial));
    else
      rows.push_back(run_law(identity_of(L::name, L::formula), /*claimed=*/true, options, tolerance, trial));
  }
}

/// Runs law testers in order, one row each: grape::check<E> passes the built-ins, then E's extra_laws.
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
  report.positions = fmt::format("{}..{}", E::signed_positions ? 1 - E::position_limit : 0, E::position_limit - 1);
  detail::run_laws<E>(detail::join(detail::builtin_laws{}, typename detail::extra_laws_of<E>::type{}), fixed, options,
                      report.laws);
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
