// math::log_sigmoid_in_place (Eigen's packets, log1p through log) against log σ(z) computed in
// __float128 here, over the whole range a GRAPE-AP argument takes and past it.
#include <gtest/gtest.h>

#include <cmath>
#include <quadmath.h>
#include <random>
#include <vector>

#include "grape/math/log_sigmoid_packets.hpp"

namespace grape::math {
namespace {

double exact_log_sigmoid(double z) {  // −log(1 + e^−z), in quad precision
  const __float128 q = z;
  return static_cast<double>(q < 0 ? q - log1pq(expq(q)) : -log1pq(expq(-q)));
}

TEST(LogSigmoidPackets, WithinFourUlpOfQuadPrecision) {
  std::mt19937_64 rng(20261206);
  std::vector<double> z = {-800.0, -40.0, -1.0, -1e-3, -1e-300, 0.0, 1e-300, 1e-3, 1.0, 36.0, 40.0, 700.0, 800.0};
  std::uniform_real_distribution<double> wide(-60.0, 60.0), narrow(-1.0, 1.0);
  for (int i = 0; i < 20000; ++i) z.push_back(i % 2 ? wide(rng) : narrow(rng));
  Eigen::ArrayXd t = Eigen::Map<Eigen::ArrayXd>(z.data(), static_cast<Eigen::Index>(z.size()));
  const double slope = -0.375;
  log_sigmoid_in_place(t, slope);
  double worst = 0;
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double want = slope * exact_log_sigmoid(z[i]);
    const double ulp = std::nextafter(std::abs(want), INFINITY) - std::abs(want);
    const double err = std::abs(t[static_cast<Eigen::Index>(i)] - want) / (want == 0 ? 1e-300 : ulp);
    worst = std::max(worst, err);
    ASSERT_LE(err, 4.0) << "z = " << z[i] << ": " << t[static_cast<Eigen::Index>(i)] << " against " << want;
  }
  RecordProperty("worst_ulp", std::to_string(worst));
}

}  // namespace
}  // namespace grape::math
