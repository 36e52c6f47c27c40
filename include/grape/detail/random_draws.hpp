#pragma once
// Scalar draws for the checker from a seeded engine (every report is reproducible). Light: no
// Eigen, so that the law headers an encoding header names can use them.
#include <cmath>
#include <initializer_list>
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

}  // namespace grape::detail
