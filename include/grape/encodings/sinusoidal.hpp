#pragma once
// sinusoidal: the absolute encoding of "Attention is all you need", added to the input:
// PE(m)[2i] = sin(m·θ_i), PE(m)[2i+1] = cos(m·θ_i). It is ρ(m)·e for the RoPE representation, so
// PE(m + k) = M_k·PE(m) (shift-linear), but added to content the score law fails.
#include <boost/hana/define_struct.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/add_embedding.hpp"
#include "grape/rep/rotation_planes.hpp"

namespace grape {

struct sinusoidal_table {
  rotation_planes<1> planes;
  int dim() const { return planes.dim(); }
  const rotation_planes<1>& representation() const { return planes; }
  void embed(const std::array<std::int64_t, 1>& c, double* out) const {
    for (int i = 0; i < planes.planes(); ++i) {
      const double a = math::phase_to_radians(planes.phase(i, c));
      out[2 * i] = std::sin(a);
      out[2 * i + 1] = std::cos(a);
    }
  }
};

struct sinusoidal final : encoding<translation<1>, rotation_planes<1>, add_embedding<sinusoidal_table>> {
  static constexpr std::string_view name = "sinusoidal";
  static constexpr std::string_view summary =
      "sinusoidal absolute encoding added to the input (Vaswani et al.)";
  static constexpr law_set claims = law::group | law::shift_linear;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, dim), (double, base));
  };
  static params default_params() { return {512, 10000.0}; }
  static params random_params(std::mt19937_64& rng) {
    return {detail::pick(rng, {4, 8, 16}), detail::log_uniform(rng, 100.0, 1e4)};
  }
  static instance make(const params& p) {
    detail::require_even("dim", p.dim);
    detail::require_positive("base", p.base);
    return {{rotation_planes<1>::from_inv_freq(rope_inv_freq(p.dim, p.base))}};
  }
};

}  // namespace grape
