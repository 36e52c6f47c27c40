#pragma once
// The independent dense float64 reference: ρ(c) = exp(Σ_k c_k L_k) from the representation's
// generators, with Eigen's matrix exponential; keys paired by the inverse transpose use
// exp(−Σ_k c_k L_kᵀ).
#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <unsupported/Eigen/MatrixFunctions>

#include "grape/rep/concepts.hpp"

namespace grape {

template <class R, std::size_t N>
Eigen::MatrixXd exponent_of(const R& rep, const std::array<std::int64_t, N>& c) {
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(rep.dim(), rep.dim());
  for (std::size_t k = 0; k < N; ++k) A += static_cast<double>(c[k]) * rep.generator(static_cast<int>(k));
  return A;
}

template <class R, std::size_t N>
Eigen::MatrixXd reference_matrix(const R& rep, const std::array<std::int64_t, N>& c, bool is_key) {
  const Eigen::MatrixXd A = exponent_of(rep, c);
  if (is_key && R::pairing == key_pairing::inverse_transpose) return Eigen::MatrixXd((-A.transpose()).exp());
  return Eigen::MatrixXd(A.exp());
}

}  // namespace grape
