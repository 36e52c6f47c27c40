// dL/dp of GRAPE-AP's path-integral bias (cpu::path_integral_grad) against float64 central finite
// differences of the bias itself (path_integral_bias, made again from moved projections), with
// L = Σ_{n<=m} G[h, m, n]·b_h(m, n) for a random G; and the entries above the diagonal not read.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/path_integral_grad.hpp"

namespace grape::test {
namespace {

constexpr int heads = 3, length = 9, p_dim = 4;
constexpr double eps = 1e-6;

double loss(const std::vector<double>& projections, const std::vector<double>& g) {
  const auto b = detail::make_path_integral_bias(heads, p_dim, eps, projections);
  double l = 0;
  for (int h = 0; h < heads; ++h)
    for (int m = 0; m < length; ++m)
      for (int n = 0; n <= m; ++n)
        l += g[(h * length + m) * length + n] *
             b.bias(h, std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n});
  return l;
}

TEST(PathIntegralGrad, MatchesFiniteDifferencesOfTheBias) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<double> projections(heads * length * p_dim), g(heads * length * length);
  for (auto& v : projections) v = 2.0 * z(rng);
  for (auto& v : g) v = z(rng);
  // Above the diagonal: values the gradient must not read.
  for (int h = 0; h < heads; ++h)
    for (int m = 0; m < length; ++m)
      for (int n = m + 1; n < length; ++n) g[(h * length + m) * length + n] = std::numeric_limits<double>::quiet_NaN();
  const auto b = detail::make_path_integral_bias(heads, p_dim, eps, projections);
  std::vector<double> grad(projections.size(), -1.0);
  cpu::path_integral_grad(b, g.data(), grad.data());
  for (std::size_t i = 0; i < projections.size(); ++i) {
    auto moved = projections;
    const double h = 1e-6;
    moved[i] += h;
    const double up = loss(moved, g);
    moved[i] -= 2 * h;
    const double want = (up - loss(moved, g)) / (2 * h);
    EXPECT_NEAR(grad[i], want, 1e-6 * (1 + std::abs(want))) << "dL/dp[" << i << "]";
  }
}

}  // namespace
}  // namespace grape::test
