// The device-safe element functions against float64 / long double computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <quadmath.h>
#include <random>

#include "grape/check/bias_reference.hpp"
#include "grape/math/bias.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/sincos.hpp"

namespace grape::math {
namespace {

TEST(Sincos, WithinTwoUlpOfLongDoubleOverWholeTurn) {
  std::mt19937_64 rng(5);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const phase_t p = rng();
    const auto sc = sincos_of_phase(p);
    const long double a = static_cast<long double>(static_cast<std::int64_t>(p)) * 6.283185307179586476925286766559L /
                          18446744073709551616.0L;
    worst = std::max({worst, std::fabs(static_cast<double>(sc.sin - sinl(a))), std::fabs(static_cast<double>(sc.cos - cosl(a)))});
  }
  EXPECT_LT(worst, 2.5e-7) << "max abs error of sin/cos over random phases";
}

TEST(Sincos, ExactQuadrants) {
  EXPECT_EQ(sincos_of_phase(0).sin, 0.0f);
  EXPECT_EQ(sincos_of_phase(0).cos, 1.0f);
  EXPECT_NEAR(sincos_of_phase(phase_t{1} << 62).sin, 1.0f, 1e-7f);          // quarter turn
  EXPECT_NEAR(sincos_of_phase(phase_t{1} << 63).cos, -1.0f, 1e-7f);         // half turn
  EXPECT_NEAR(sincos_of_phase(phase_t{3} << 62).sin, -1.0f, 1e-7f);         // three quarters
}

TEST(Phase, TurnFractionIsTheNearest64BitFractionOfATurn) {
  // Independent: the fraction computed in quad precision (113-bit significand).
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> log_theta(-25.0, 3.0);
  for (int i = 0; i < 10000; ++i) {
    const double theta = std::exp(log_theta(rng));
    const __float128 two_pi = 8 * atanq(static_cast<__float128>(1));  // no Q literals in strict C++20
    __float128 turns = static_cast<__float128>(theta) / two_pi;
    turns -= static_cast<__float128>(static_cast<std::int64_t>(turns));
    const __float128 scaled = turns * static_cast<__float128>(18446744073709551616.0L);
    const __float128 got = static_cast<__float128>(turn_fraction_of(theta));
    EXPECT_LE(static_cast<double>(fabsq(got - scaled)), 1.0) << theta;
  }
  EXPECT_EQ(turn_fraction_of(0.0), phase_t{0});
}

TEST(Phase, PhaseIsLinearInPositionModuloOneTurn) {
  const phase_t f = turn_fraction_of(0.7);
  for (std::int64_t m : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{2147483647}, std::int64_t{1} << 40})
    EXPECT_EQ(phase_at(m + 1, f) - phase_at(m, f), f);
  EXPECT_EQ(phase_at(-5, f) + phase_at(5, f), phase_t{0});
}

TEST(Phase, AngleAtLongPositionsMatchesLongDoubleReduction) {
  const double theta = 1.0;  // the fastest RoPE plane
  const phase_t f = turn_fraction_of(theta);
  for (std::int64_t m : {std::int64_t{1} << 20, std::int64_t{2147483647}}) {
    const long double two_pi = 6.283185307179586476925286766559L;
    long double ref = fmodl(static_cast<long double>(m) * theta, two_pi);
    if (ref >= two_pi / 2) ref -= two_pi;
    EXPECT_NEAR(phase_to_radians(phase_at(m, f)), static_cast<double>(ref), 1e-9) << m;
  }
}

TEST(AlibiSlope, TwelveHeadsMatchThePublishedValues) {
  const double expected[12] = {std::exp2(-1), std::exp2(-2), std::exp2(-3), std::exp2(-4), std::exp2(-5), std::exp2(-6),
                               std::exp2(-7), std::exp2(-8), std::exp2(-0.5), std::exp2(-1.5), std::exp2(-2.5),
                               std::exp2(-3.5)};
  for (int h = 0; h < 12; ++h) EXPECT_DOUBLE_EQ(alibi_slope(h, 12), expected[h]) << h;
}

TEST(AlibiSlope, AgreesWithThePaperRuleForEveryHeadCountUpTo128) {
  for (int heads = 1; heads <= 128; ++heads) {
    const auto ref = grape::reference::alibi_slopes(heads);
    for (int h = 0; h < heads; ++h) EXPECT_NEAR(alibi_slope(h, heads), ref[h], 1e-13 * ref[h]) << heads << " " << h;
  }
}

TEST(T5Bucket, AgreesWithTheTranscribedReference) {
  for (bool bidirectional : {true, false})
    for (int buckets : {8, 32})
      for (std::int64_t rel = -3000; rel <= 3000; rel += 7)
        EXPECT_EQ(t5_bucket(rel, bidirectional, buckets, 128), grape::reference::t5_bucket(rel, bidirectional, buckets, 128))
            << rel;
  // Every offset around max_distance, where the kernel stops taking the logarithm.
  for (bool bidirectional : {true, false})
    for (int buckets : {8, 32})
      for (int max_distance : {buckets, 100, 128, 1000})
        for (std::int64_t rel = -2 * max_distance - 3; rel <= 2 * max_distance + 3; ++rel)
          ASSERT_EQ(t5_bucket(rel, bidirectional, buckets, max_distance),
                    grape::reference::t5_bucket(rel, bidirectional, buckets, max_distance))
              << rel << " " << buckets << " " << max_distance;
}

TEST(T5Bucket, SmallOffsetsHaveTheirOwnBucket) {
  EXPECT_EQ(t5_bucket(0, true, 32, 128), 0);
  EXPECT_EQ(t5_bucket(-3, true, 32, 128), 3);
  EXPECT_EQ(t5_bucket(3, true, 32, 128), 16 + 3);
  EXPECT_EQ(t5_bucket(5, false, 32, 128), 0);  // future keys share bucket 0 in the causal form
}

}  // namespace
}  // namespace grape::math

#include "grape/math/rotate_vector.hpp"

namespace grape::math {
namespace {

TEST(RotateVector, MatchesTheRotationFormulaInBothLayouts) {
  const int d = 8, rd = 6;
  const double theta[3] = {1.0, 0.1, 0.01};
  phase_t turns[3];
  for (int i = 0; i < 3; ++i) turns[i] = turn_fraction_of(theta[i]);
  const float x[d] = {0.3f, -1.2f, 0.5f, 0.9f, -0.4f, 0.7f, 2.0f, -3.0f};
  for (layout_kind layout : {layout_kind::half_split, layout_kind::interleaved}) {
    float y[d];
    const std::int64_t m = 123456789;
    rotate_vector(x, y, m, turns, rd, d, layout, 1.5f);
    for (int i = 0; i < 3; ++i) {
      const int c0 = layout == layout_kind::half_split ? i : 2 * i, c1 = layout == layout_kind::half_split ? i + 3 : 2 * i + 1;
      const long double a = fmodl(static_cast<long double>(m) * theta[i], 6.283185307179586476925286766559L);
      const double s = std::sin(static_cast<double>(a)) * 1.5, c = std::cos(static_cast<double>(a)) * 1.5;
      EXPECT_NEAR(y[c0], x[c0] * c - x[c1] * s, 2e-6) << static_cast<int>(layout) << " " << i;
      EXPECT_NEAR(y[c1], x[c1] * c + x[c0] * s, 2e-6) << static_cast<int>(layout) << " " << i;
    }
    EXPECT_EQ(y[6], 2.0f);
    EXPECT_EQ(y[7], -3.0f);
  }
}

}  // namespace
}  // namespace grape::math
