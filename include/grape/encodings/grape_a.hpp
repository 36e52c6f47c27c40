#pragma once
// grape_a: additive GRAPE. ALiBi written as a unipotent lift on augmented q and k, keys paired by
// the inverse transpose: q̃ᵀk̃ = qᵀk + slope_h·(n − m), which equals ALiBi's −slope_h·|m − n| on
// the causal side (n <= m). Relative although ρ is not orthogonal.
#include <boost/hana/define_struct.hpp>
#include <random>
#include <vector>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/encodings/alibi.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/lift_qk.hpp"
#include "grape/rep/unipotent_lift.hpp"

namespace grape {

struct grape_a final : encoding<translation<1>, unipotent_lift, lift_qk> {
  static constexpr std::string_view name = "grape_a";
  static constexpr std::string_view summary =
      "GRAPE-A: ALiBi as a unipotent lift I + m*A (A^2 = 0) on [q;1;0], keys by the inverse transpose";
  /// The float32 path adds t·u·(vᵀx) to x: its rounding is eps32·|t|·‖u‖·Σ|v_i x_i|, relative to
  /// the lift and not to the result, which the float32 tolerance is stated against. Past 2^20 a
  /// cancelling vᵀx exceeds it (found at m = 3·10^7).
  static constexpr std::int64_t position_limit = std::int64_t{1} << 20;
  static constexpr std::string_view position_limit_reason =
      "float32 lift rounding is relative to |t·u|·Σ|v_i x_i|, not to the result: stated to 2^20";
  static constexpr law_set claims = law::group | law::homomorphism | law::relative | law::score_invariance |
                                    law::reference_agreement | law::float32_agreement;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, heads), (int, head_dim), (double, max_bias));
  };
  static params default_params() { return {12, 64, 8.0}; }
  static params random_params(std::mt19937_64& rng) {
    return {std::uniform_int_distribution<int>(1, 16)(rng), detail::pick(rng, {2, 4, 8}), 8.0};
  }
  static instance make(const params& p) {
    detail::require_count("head_dim", p.head_dim);
    instance inst;
    inst.head_dim = p.head_dim;
    for (double s : alibi_slopes(p.heads, p.max_bias)) inst.reps.push_back(unipotent_lift::alibi(p.head_dim, s));
    return inst;
  }
};

}  // namespace grape
