#pragma once
// The float64 reference of one encoded head (exp(Σ c_k L_k) through the layout, times the
// attention factor); the storage tolerances are the checker's (check/kernel_case.hpp).
#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "grape/builtins.hpp"
#include "grape/check/kernel_case.hpp"
#include "grape/check/reference.hpp"

namespace grape {

/// Reference output of one head: y[ch(j)] = af·Σ_l ρ(j, l)·x[ch(l)] inside the rotary window.
template <class E>
inline std::vector<double> reference_head(const typename E::instance& inst, bool is_key,
                                   const std::array<std::int64_t, E::group::rank>& c, const std::vector<double>& x) {
  using layouts = layouts_of<typename E::instance>;
  const layout_kind layout = is_key ? layouts::k : layouts::q;
  const int d = inst.rotary_dim();
  const Eigen::MatrixXd rho = reference_matrix(inst.rep, c, is_key);
  std::vector<double> y(x);
  for (int j = 0; j < d; ++j) {
    double s = 0;
    for (int l = 0; l < d; ++l) s += rho(j, l) * x[inst.channel_of(layout, l, d)];
    y[inst.channel_of(layout, j, d)] = inst.attention_factor * s;
  }
  return y;
}

}  // namespace grape
