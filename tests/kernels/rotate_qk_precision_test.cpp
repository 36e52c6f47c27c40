// The precision bound of docs/precision.md: for every position from 0 to 2^31 − 1 (log-spaced,
// with neighbours) and every plane, a unit-norm pair rotated by the f32 kernel is within 2e-6 of
// the exact rotation by the angle m·θ_i, θ_i the double frequency — on the on-the-fly path and
// the cached path. The exact angle is formed independently of grape's phase arithmetic: the
// product m·θ_i is exact in __float128 (31 + 53 bits < 113), reduced modulo a 2π carried to
// ~160 bits as three doubles, and the reduced angle's sin/cos taken in long double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu/rotate_qk.hpp"

namespace grape::test {
namespace {

__extension__ typedef __float128 quad;

/// m·θ modulo 2π, in [0, 2π), as long double.
long double reduced_angle(std::int64_t m, double theta) {
  const quad two_pi = static_cast<quad>(6.283185307179586) + static_cast<quad>(2.4492935982947064e-16) +
                      static_cast<quad>(-5.989539619436679e-33);
  const quad angle = static_cast<quad>(m) * static_cast<quad>(theta);  // exact
  const auto turns = static_cast<std::int64_t>(angle / two_pi);         // angle >= 0
  quad r = angle - static_cast<quad>(turns) * two_pi;
  if (r < 0) r += two_pi;
  if (r >= two_pi) r -= two_pi;
  return static_cast<long double>(r);
}

std::vector<std::int64_t> log_spaced_positions() {
  std::vector<std::int64_t> p{0, 1, 2, 3};
  const std::int64_t top = (std::int64_t{1} << 31) - 1;
  for (int k = 8; k <= 4 * 31; ++k) {
    const auto m = static_cast<std::int64_t>(std::llround(std::pow(2.0, k / 4.0)));
    for (std::int64_t d : {-1, 0, 1})
      if (m + d > 3 && m + d <= top) p.push_back(m + d);
  }
  p.push_back(top - 1);
  p.push_back(top);
  return p;
}

rotary_spec precision_spec(double base, math::layout_kind layout) {
  rotary_spec s;
  s.head_dim = s.rotary_dim = 128;
  s.layout = layout;
  for (int i = 0; i < 64; ++i) s.inv_freq.push_back(std::pow(base, -2.0 * i / 128));
  s.inv_freq[1] = 2.0;  // a frequency above one radian per position as well
  return s;
}

/// Max abs error over all outputs for the given positions, one token per position, one head.
double max_error(const rotary_spec& spec, const std::vector<std::int64_t>& positions,
                 const cpu::rotary_cache* cache) {
  const std::int64_t tokens = static_cast<std::int64_t>(positions.size());
  const int half = spec.rotary_dim / 2;
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> turn(0.0, 6.283185307179586);
  std::vector<float> x(tokens * spec.head_dim), y(x.size());
  std::vector<double> alpha(tokens * half);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < half; ++i) {
      alpha[t * half + i] = turn(rng);
      // Unit-norm pair as stored in float; the reference uses the stored values.
      x[t * spec.head_dim + math::first_channel(spec.layout, i, spec.rotary_dim)] =
          static_cast<float>(std::cos(alpha[t * half + i]));
      x[t * spec.head_dim + math::second_channel(spec.layout, i, spec.rotary_dim)] =
          static_cast<float>(std::sin(alpha[t * half + i]));
    }
  cpu::rotate_qk_args args;
  args.q = {x.data(), y.data(), 1, static_cast<std::int64_t>(x.size()), 0, spec.head_dim, spec.head_dim};
  args.seq_len = tokens;
  args.position_ids = positions.data();
  args.cache = cache;
  cpu::rotate_qk(spec, args);
  double worst = 0;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < half; ++i) {
      const int c0 = math::first_channel(spec.layout, i, spec.rotary_dim);
      const int c1 = math::second_channel(spec.layout, i, spec.rotary_dim);
      const long double a = reduced_angle(positions[t], spec.inv_freq[i]);
      const long double cs = std::cos(a), sn = std::sin(a);
      const long double x0 = x[t * spec.head_dim + c0], x1 = x[t * spec.head_dim + c1];
      const long double e0 = x0 * cs - x1 * sn, e1 = x1 * cs + x0 * sn;
      worst = std::max(worst, static_cast<double>(std::fabs(e0 - y[t * spec.head_dim + c0])));
      worst = std::max(worst, static_cast<double>(std::fabs(e1 - y[t * spec.head_dim + c1])));
    }
  return worst;
}

constexpr double bound = 2e-6;

TEST(rotate_qk_precision, on_the_fly_to_2_pow_31) {
  for (double base : {10000.0, 500000.0})
    for (auto layout : {math::layout_kind::half_split, math::layout_kind::interleaved}) {
      const double e = max_error(precision_spec(base, layout), log_spaced_positions(), nullptr);
      RecordProperty("max_abs_error_on_the_fly", std::to_string(e));
      std::printf("on the fly, base %g, layout %d: max abs error %.3g\n", base, int(layout), e);
      EXPECT_LE(e, bound) << "base " << base;
    }
}

TEST(rotate_qk_precision, cached_to_2_pow_31) {
  // A cache cannot hold 2^31 rows, so each group of positions gets a cache window around it
  // (rotary_cache::first_position); the rows are built with the same exact phase.
  for (auto layout : {math::layout_kind::half_split, math::layout_kind::interleaved}) {
    const rotary_spec spec = precision_spec(10000.0, layout);
    double worst = 0;
    const std::vector<std::int64_t> all = log_spaced_positions();
    for (std::size_t g = 0; g < all.size(); g += 3) {
      std::vector<std::int64_t> group(all.begin() + g, all.begin() + std::min(all.size(), g + 3));
      const std::int64_t lo = *std::min_element(group.begin(), group.end());
      const std::int64_t hi = *std::max_element(group.begin(), group.end());
      if (hi - lo > 64) {  // spread out: one window per position
        for (std::int64_t m : group) {
          const cpu::rotary_cache c = cpu::rotary_cache::build(spec, m + 1, m);
          worst = std::max(worst, max_error(spec, {m}, &c));
        }
        continue;
      }
      const cpu::rotary_cache c = cpu::rotary_cache::build(spec, hi + 1, lo);
      worst = std::max(worst, max_error(spec, group, &c));
    }
    RecordProperty("max_abs_error_cached", std::to_string(worst));
    std::printf("cached, layout %d: max abs error %.3g\n", int(layout), worst);
    EXPECT_LE(worst, bound);
  }
}

TEST(rotate_qk_precision, the_reference_is_independent_and_sharp) {
  // Sanity of the test itself: a float32 angle (what the reference implementations compute)
  // fails the bound at large positions, so the bound is not vacuous.
  const std::int64_t m = 1000003;
  const double theta = 0.1;
  const float naive = std::cos(static_cast<float>(m) * static_cast<float>(theta));
  EXPECT_GT(std::fabs(naive - static_cast<double>(std::cos(reduced_angle(m, theta)))), bound);
}

}  // namespace
}  // namespace grape::test
