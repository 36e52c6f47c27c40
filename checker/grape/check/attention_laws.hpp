#pragma once
// Laws that run the fused attention kernel (cpu::attention) on the encoding under test, built-in
// or a user's: its output against the float64 dense reference (the instance's own score, softmax
// materialized), and the relative law on the kernel itself — every query and key position moved
// by t leaves the output unchanged. The first is claimed whenever the kernel takes the encoding;
// the second only by an encoding that claims score_invariance, and an absolute or content-bound
// one (FoX with its gates fixed) is reported as not invariant, with the shift that shows it.
#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <optional>
#include <string_view>

#include "grape/check/attention_case.hpp"
#include "grape/check/builtin_laws.hpp"
#include "grape/check/kernel_laws.hpp"
#include "grape/check/trial.hpp"

namespace grape::detail {

/// cpu::attention takes E's instance, with positions on one axis and a view of its representation.
template <class E>
constexpr bool runs_attention = [] {
  if constexpr (E::group::rank == 1) return cpu::attention_takes<typename E::instance> && !lacks_view<E>;
  else return false;
}();

/// Why the attention laws do not run on an encoding the fused attention would take given a view.
template <class E>
constexpr std::string_view attention_not_run = E::group::rank == 1 && lacks_view<E> && (rotates_qk<E> || lifts_qk<E>)
                                                   ? no_view
                                                   : "";

/// A random attention call for one trial: sequences of up to 24 tokens, positions in the window
/// the kernel laws draw (kernel_positions: a base from the trial's draws, 64 positions above it).
template <class E>
attention_case<typename E::instance, float> draw_attention_case(trial_inputs<E>& t, const position_draw& p) {
  return {t.rng, t.instance, encoding_heads(t.instance), std::min<std::int64_t>(24, p.spread), p.base, p.spread};
}

inline std::string attention_at(const auto& call, std::int64_t shift = 0) {
  return fmt::format("tokens={} heads={}/{} causal={} window={} positions from {}{}", call.total, call.heads,
                     call.kv_heads, call.args.causal, call.args.window, call.position(0, 0),
                     shift ? fmt::format(", shifted by {}", shift) : std::string());
}

struct attention_kernel_law {
  static constexpr std::string_view name = "attention_kernel";
  static constexpr std::string_view formula =
      "cpu::attention(instance, random call) = softmax(score(h, q, k, m, n))·V in float64";
  static constexpr std::string_view tolerance =
      "max |error| <= 2(e^(2δ) − 1) max|V| + (4 (keys + 16) eps32 + tol(storage)) max|V|, "
      "δ = 2(√w + 4) eps32 Σ|q'k'| + 4 eps32 |logit| (attention_case::compare)";
  template <class E>
  static constexpr bool applies = runs_attention<E>;
  template <class E>
  static constexpr std::string_view not_run = attention_not_run<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    auto call = draw_attention_case(t, kernel_positions(t));
    cpu::attention(call.inst, call.args);
    const attention_comparison c = call.compare();
    return judge(attention_at(call), c.worst, 0.0, c.worst, c.bound, "max |output − float64 reference|");
  }
};

struct attention_shift_law {
  static constexpr std::string_view name = "attention_shift";
  static constexpr std::string_view formula = "cpu::attention with every position moved by t = the same output";
  static constexpr std::string_view tolerance = "max |O(p + t) − O(p)| <= the sum of both calls' attention_kernel bounds";
  template <class E>
  static constexpr bool applies = runs_attention<E>;
  template <class E>
  static constexpr std::string_view not_run = attention_not_run<E>;
  template <class E>
  static constexpr bool claimed = E::claims.contains(law::score_invariance);

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const position_draw p = kernel_positions(t);
    auto call = draw_attention_case(t, p);
    const std::int64_t room = t.limit - p.spread - p.base;  // positions stay below the encoding's range
    const std::int64_t shift = room > 0 ? 1 + std::min(std::abs(t.draw_position()), room - 1) : 0;
    auto moved = call.shifted(shift);
    cpu::attention(call.inst, call.args);
    cpu::attention(moved.inst, moved.args);
    double worst = 0;
    for (std::size_t i = 0; i < call.out.size(); ++i)
      worst = max_keeping_nan(worst, std::abs(static_cast<double>(call.out[i]) - static_cast<double>(moved.out[i])));
    const double bound = call.compare().bound + moved.compare().bound;
    return judge(attention_at(call, shift), worst, 0.0, worst, bound, "max |O(p + t) − O(p)|");
  }
};

/// The attention laws in report order, after the kernel laws.
using attention_laws = law_list<attention_kernel_law, attention_shift_law>;

}  // namespace grape::detail
