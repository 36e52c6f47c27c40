#pragma once
// liere_2d: 2-D positions with one dense skew generator per axis, ρ(x, y) = exp(x·L_x)·exp(y·L_y)
// (LieRE). The built-in draws commuting generators (both diagonal in one shared random basis), so
// the relative law holds; tests/laws/mutants.cpp shows the checker rejecting non-commuting ones.
#include <boost/hana/define_struct.hpp>
#include <cstdint>
#include <random>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"
#include "grape/rep/skew_generators.hpp"

namespace grape {

/// B·(Σ_j θ_j J_j)·Bᵀ with θ_j placed on planes [first, first + θ.size()).
inline Eigen::MatrixXd planes_in_basis(const Eigen::MatrixXd& basis, const std::vector<double>& theta, int first) {
  Eigen::MatrixXd planes = Eigen::MatrixXd::Zero(basis.rows(), basis.cols());
  for (std::size_t j = 0; j < theta.size(); ++j) {
    const int i = 2 * (first + static_cast<int>(j));
    planes(i + 1, i) = theta[j];
    planes(i, i + 1) = -theta[j];
  }
  return basis * planes * basis.transpose();
}

struct liere_2d final : encoding<translation<2>, skew_generators<2>, rotate_qk<layout_kind::interleaved>> {
  static constexpr std::string_view name = "liere_2d";
  static constexpr std::string_view summary =
      "LieRE 2-D: exp(x L_x) exp(y L_y) with commuting dense skew generators";
  static constexpr law_set claims = rotary_laws;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, head_dim), (double, base), (std::uint64_t, basis_seed));
  };
  static params default_params() { return {32, 100.0, 1}; }
  static params random_params(std::mt19937_64& rng) {
    return {4 * detail::pick(rng, {1, 2, 4}), detail::log_uniform(rng, 10.0, 1e4), rng()};
  }
  static instance make(const params& p) {
    detail::require_positive("base", p.base);
    if (p.head_dim <= 0 || p.head_dim % 4 != 0)
      throw input_error(fmt::format("head_dim: must be a positive multiple of 4 (got {})", p.head_dim));
    std::mt19937_64 rng(p.basis_seed);
    const Eigen::MatrixXd basis = detail::random_orthogonal(rng, p.head_dim);
    const auto theta = rope_inv_freq(p.head_dim / 2, p.base);
    return {skew_generators<2>({planes_in_basis(basis, theta, 0),
                                planes_in_basis(basis, theta, p.head_dim / 4)}),
            p.head_dim, 1.0};
  }
};

}  // namespace grape
