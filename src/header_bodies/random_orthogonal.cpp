// detail::random_orthogonal, compiled once (Eigen's QR is heavy to parse in every includer).
#include <Eigen/QR>

#include "grape/detail/random.hpp"

namespace grape::detail {

Eigen::MatrixXd random_orthogonal(std::mt19937_64& rng, int n) {
  std::normal_distribution<double> g(0.0, 1.0);
  Eigen::MatrixXd a(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) a(i, j) = g(rng);
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
  return qr.householderQ();
}

}  // namespace grape::detail
