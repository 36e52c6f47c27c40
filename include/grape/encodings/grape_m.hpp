#pragma once
// grape_m: multiplicative GRAPE with a rank-2 generator L = ω(a bᵀ − b aᵀ), applied in O(d) by the
// closed form (rep/rank2_rotation.hpp). Orthogonal, so all the rotary laws hold.
#include <boost/hana/define_struct.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rank2_rotation.hpp"

namespace grape {

struct grape_m final : encoding<translation<1>, rank2_rotation, rotate_qk<layout_kind::interleaved>> {
  static constexpr std::string_view name = "grape_m";
  static constexpr std::string_view summary =
      "GRAPE-M rank-2: exp(m*omega*(a b^T - b a^T)) in O(d) by the closed form";
  static constexpr law_set claims = rotary_laws;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, head_dim), (double, omega), (std::vector<double>, a),
                             (std::vector<double>, b));
  };
  static params default_params() {
    std::mt19937_64 rng(1);
    return {64, 0.05, detail::normal_vector(rng, 64, 0.125), detail::normal_vector(rng, 64, 0.125)};
  }
  static params random_params(std::mt19937_64& rng) {
    const int d = detail::pick(rng, {2, 3, 8, 16, 33});
    const double sigma = 1.0 / std::sqrt(static_cast<double>(d));
    return {d, detail::log_uniform(rng, 1e-3, 2.0), detail::normal_vector(rng, d, sigma),
            detail::normal_vector(rng, d, sigma)};
  }
  static instance make(const params& p) {
    detail::require_count("head_dim", p.head_dim, 2);
    detail::require_finite("omega", p.omega);
    if (static_cast<int>(p.a.size()) != p.head_dim || static_cast<int>(p.b.size()) != p.head_dim)
      throw input_error(fmt::format("a, b: must hold head_dim = {} values each (got {} and {})", p.head_dim,
                                    p.a.size(), p.b.size()));
    for (std::size_t i = 0; i < p.a.size(); ++i) {
      detail::require_finite_at("a", i, p.a[i]);
      detail::require_finite_at("b", i, p.b[i]);
    }
    return {rank2_rotation(p.a, p.b, p.omega), p.head_dim, 1.0};
  }
};

}  // namespace grape
