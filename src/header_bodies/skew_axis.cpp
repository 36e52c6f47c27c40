// detail::decompose_skew, compiled once (Eigen's RealSchur is heavy to parse in every includer).
#include <Eigen/Eigenvalues>
#include <cmath>

#include "grape/rep/skew_generators.hpp"

namespace grape::detail {

// Real Schur form L = Q T Qᵀ; for a skew L, T is block diagonal with 2×2 blocks θ·J.
skew_axis decompose_skew(const Eigen::MatrixXd& L) {
  skew_axis a;
  Eigen::RealSchur<Eigen::MatrixXd> schur(L);
  a.basis = schur.matrixU();
  a.basis_f = a.basis.cast<float>();
  a.basis_tf = a.basis_f.transpose();
  const Eigen::MatrixXd& T = schur.matrixT();
  const double tiny = 1e-12 * (1.0 + L.norm());
  for (int j = 0; j + 1 < T.rows();) {
    if (std::abs(T(j + 1, j)) > tiny) {
      a.first.push_back(j);
      a.turns.push_back(math::turn_fraction_of(T(j + 1, j)));
      j += 2;
    } else {
      j += 1;
    }
  }
  return a;
}

}  // namespace grape::detail
