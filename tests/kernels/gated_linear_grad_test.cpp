// dL/d(ω, gates) of gated GRAPE-A's bias (cpu::gated_linear_grad) against float64 central finite
// differences of the bias itself (gated_linear_bias::bias), with L = Σ_{n<=m} G[h, m, n]·b_h(m, n)
// for a random G, key-gated and query+key-gated; the entries above the diagonal are not read.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/gated_linear_grad.hpp"

namespace grape::test {
namespace {

constexpr int heads = 3, length = 11;

double loss(const gated_linear_bias& b, const std::vector<double>& g) {
  double l = 0;
  for (int h = 0; h < heads; ++h)
    for (int m = 0; m < length; ++m)
      for (int n = 0; n <= m; ++n)
        l += g[(h * length + m) * length + n] * b.bias(h, std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n});
  return l;
}

/// The bias's values in its parameter layout, and back.
std::vector<double> values(const gated_linear_bias& b) {
  std::vector<double> v(b.omega);
  v.insert(v.end(), b.key_gate.begin(), b.key_gate.end());
  v.insert(v.end(), b.query_gate.begin(), b.query_gate.end());
  return v;
}
gated_linear_bias with_values(gated_linear_bias b, const std::vector<double>& v) {
  auto at = v.begin();
  for (auto* part : {&b.omega, &b.key_gate, &b.query_gate})
    for (auto& x : *part) x = *at++;
  return b;
}

void expect_finite_differences(bool query_gated) {
  std::mt19937_64 rng(query_gated ? 5 : 4);
  std::uniform_real_distribution<double> positive(0.05, 1.5);
  std::normal_distribution<double> z(0.0, 1.0);
  gated_linear_bias b{heads, length, {}, {}, {}};
  for (int h = 0; h < heads; ++h) b.omega.push_back(positive(rng));
  for (int e = 0; e < heads * length; ++e) {
    b.key_gate.push_back(positive(rng));
    if (query_gated) b.query_gate.push_back(positive(rng));
  }
  std::vector<double> g(heads * length * length);
  for (auto& x : g) x = z(rng);
  for (int h = 0; h < heads; ++h)  // above the diagonal: values the gradient must not read
    for (int m = 0; m < length; ++m)
      for (int n = m + 1; n < length; ++n) g[(h * length + m) * length + n] = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> grad(b.parameter_count(), std::numeric_limits<double>::quiet_NaN());
  cpu::gated_linear_grad(b, g.data(), grad.data());
  const std::vector<double> v = values(b);
  ASSERT_EQ(v.size(), grad.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto moved = v;
    const double step = 1e-5;
    moved[i] += step;
    const double up = loss(with_values(b, moved), g);
    moved[i] -= 2 * step;
    const double want = (up - loss(with_values(b, moved), g)) / (2 * step);
    EXPECT_NEAR(grad[i], want, 1e-7 * (1 + std::abs(want))) << "parameter " << i;
  }
}

TEST(GatedLinearGrad, KeyGatedMatchesFiniteDifferencesOfTheBias) { expect_finite_differences(false); }
TEST(GatedLinearGrad, QueryKeyGatedMatchesFiniteDifferencesOfTheBias) { expect_finite_differences(true); }

}  // namespace
}  // namespace grape::test
