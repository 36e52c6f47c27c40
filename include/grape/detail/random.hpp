#pragma once
// Random parameters for the checker: drawn from a seeded engine so every report is reproducible.
#include <Eigen/Core>
#include <cmath>
#include <random>
#include <vector>

namespace grape::detail {

inline double log_uniform(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  return std::exp(u(rng));
}
inline int pick(std::mt19937_64& rng, std::initializer_list<int> values) {
  std::uniform_int_distribution<std::size_t> u(0, values.size() - 1);
  return *(values.begin() + u(rng));
}
inline std::vector<double> normal_vector(std::mt19937_64& rng, int n, double sigma = 1.0) {
  std::normal_distribution<double> g(0.0, sigma);
  std::vector<double> v(n);
  for (double& x : v) x = g(rng);
  return v;
}
/// A random orthogonal matrix (QR of a Gaussian matrix; src/core/random_orthogonal.cpp, so that
/// no translation unit including this header compiles Eigen's QR).
Eigen::MatrixXd random_orthogonal(std::mt19937_64& rng, int n);

}  // namespace grape::detail
