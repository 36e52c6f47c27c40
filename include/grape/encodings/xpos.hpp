#pragma once
// xpos: RoPE with an exponential scale (Sun et al.): queries by ζ_i^{m/γ}, keys by ζ_i^{−n/γ},
// ζ_i = (2i/d + g)/(1 + g), γ = scale_base. Relative (paired inverse), not norm-preserving.
#include <boost/hana/define_struct.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"
#include "grape/rep/scaled_planes.hpp"

namespace grape {

struct xpos final : encoding<translation<1>, scaled_planes, rotate_qk<layout_kind::half_split>> {
  static constexpr std::string_view name = "xpos";
  static constexpr std::string_view summary =
      "xPos: RoPE times zeta_i^(m/scale_base) on queries and its inverse on keys";
  static constexpr law_set claims = law::group | law::homomorphism | law::relative | law::score_invariance |
                                    law::reference_agreement | law::float32_agreement;
  static constexpr std::int64_t position_limit = 4096;
  static constexpr std::string_view position_limit_reason =
      "the key scale ζ^(-n/γ) leaves float32 near n = 36,000 (γ = 512, ζ >= 0.29); 4096 is 8γ";

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, head_dim), (double, base), (double, scale_base), (double, gamma));
  };
  static params default_params() { return {64, 10000.0, 512.0, 0.4}; }
  static params random_params(std::mt19937_64& rng) {
    return {detail::pick(rng, {4, 8, 16, 32}), detail::log_uniform(rng, 100.0, 1e5), 512.0, 0.4};
  }
  static instance make(const params& p) {
    detail::require_even("head_dim", p.head_dim);
    detail::require_positive("base", p.base);
    detail::require_positive("scale_base", p.scale_base);
    detail::require_positive("gamma", p.gamma);
    std::vector<double> log_scale(p.head_dim / 2);
    for (int i = 0; i < p.head_dim / 2; ++i)
      log_scale[i] = std::log((2.0 * i / p.head_dim + p.gamma) / (1.0 + p.gamma)) / p.scale_base;
    return {scaled_planes(rope_inv_freq(p.head_dim, p.base), log_scale), p.head_dim, 1.0};
  }
};

}  // namespace grape
