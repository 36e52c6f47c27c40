// Score-bias tiles against float64 references written here from the formulas in
// reference/biases.md (not through grape::math), and the ALiBi slope gradient against
// central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/score_bias.hpp"
#include "grape/detail/error.hpp"

namespace grape::test {
namespace {

TEST(score_bias, alibi_slopes_follow_the_rule_for_any_head_count) {
  const std::vector<float> s12 = cpu::alibi_slopes(12);
  const double expect[12] = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
                             std::pow(2.0, -0.5), std::pow(2.0, -1.5), std::pow(2.0, -2.5),
                             std::pow(2.0, -3.5)};
  for (int h = 0; h < 12; ++h) EXPECT_FLOAT_EQ(s12[h], expect[h]) << h;
  const std::vector<float> s8 = cpu::alibi_slopes(8);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(s8[h], std::pow(2.0, -(h + 1.0))) << h;
  EXPECT_THROW(cpu::alibi_slopes(0), input_error);
}

TEST(score_bias, alibi_tile_and_slope_gradient) {
  const std::int64_t heads = 3, q_start = 5, q_len = 7, k_start = 2, k_len = 13;
  const std::vector<float> slopes = cpu::alibi_slopes(static_cast<int>(heads));
  std::vector<float> tile(heads * q_len * k_len, 99.0f);
  cpu::bias_tile t{tile.data(), heads, q_start, q_len, k_start, k_len};
  cpu::alibi_tile(t, slopes.data());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> g(tile.size());
  for (auto& v : g) v = u(rng);
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t r = 0; r < q_len; ++r)
      for (std::int64_t c = 0; c < k_len; ++c) {
        const double d = std::abs(static_cast<double>((q_start + r) - (k_start + c)));
        EXPECT_NEAR(tile[(h * q_len + r) * k_len + c], -slopes[h] * d, 1e-6);
      }
  std::vector<double> grad(heads);
  cpu::alibi_slope_grad(t, g.data(), grad.data());
  // L(s) = Σ g·(−s_h|i − j|) is linear in s: central differences are exact up to rounding.
  for (std::int64_t h = 0; h < heads; ++h) {
    auto loss = [&](double s) {
      double l = 0;
      for (std::int64_t r = 0; r < q_len; ++r)
        for (std::int64_t c = 0; c < k_len; ++c)
          l += g[(h * q_len + r) * k_len + c] * -s * std::abs(double((q_start + r) - (k_start + c)));
      return l;
    };
    const double fd = (loss(slopes[h] + 1e-3) - loss(slopes[h] - 1e-3)) / 2e-3;
    EXPECT_NEAR(grad[h], fd, 1e-9 * (1 + std::abs(fd))) << h;
  }
}

/// The T5 bucket rule, written out from the transformers reference.
int t5_reference(std::int64_t rel, bool bidirectional, int num_buckets, int max_distance) {
  int ret = 0;
  std::int64_t n = -rel;
  if (bidirectional) {
    num_buckets /= 2;
    ret += rel > 0 ? num_buckets : 0;
    n = std::abs(n);
  } else {
    n = std::max<std::int64_t>(n, 0);
  }
  const int max_exact = num_buckets / 2;
  if (n < max_exact) return ret + static_cast<int>(n);
  const int large = max_exact + static_cast<int>(std::log(double(n) / max_exact) /
                                                 std::log(double(max_distance) / max_exact) *
                                                 (num_buckets - max_exact));
  return ret + std::min(large, num_buckets - 1);
}

TEST(score_bias, t5_tile_matches_the_bucket_rule) {
  for (bool bidir : {true, false}) {
    const std::int64_t heads = 4, q_start = 100, q_len = 9, k_start = 0, k_len = 300;
    const int nb = 32, md = 128;
    std::vector<float> table(nb * heads);
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.5f;
    std::vector<float> tile(heads * q_len * k_len);
    cpu::t5_tile({tile.data(), heads, q_start, q_len, k_start, k_len}, table.data(), nb, md, bidir);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t r = 0; r < q_len; ++r)
        for (std::int64_t c = 0; c < k_len; ++c) {
          const int b = t5_reference((k_start + c) - (q_start + r), bidir, nb, md);
          ASSERT_EQ(tile[(h * q_len + r) * k_len + c], table[b * heads + h]);
        }
  }
  std::vector<float> tile(4), table(64);
  EXPECT_THROW(cpu::t5_tile({tile.data(), 1, 0, 2, 0, 2}, nullptr, 32, 128, true), input_error);
  EXPECT_THROW(cpu::t5_tile({tile.data(), 1, 0, 2, 0, 2}, table.data(), 2, 128, true), input_error);
  EXPECT_THROW(cpu::t5_tile({tile.data(), 1, 0, 2, 0, 2}, table.data(), 32, 8, true), input_error);
}

TEST(score_bias, fox_tile_is_a_sum_of_log_gates) {
  const std::int64_t heads = 2, seq = 40;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.05f, 0.999f);
  std::vector<float> logf(heads * seq);
  for (auto& v : logf) v = std::log(u(rng));
  std::vector<double> prefix(logf.size());
  cpu::fox_prefix_sums(logf.data(), heads, seq, prefix.data());
  const std::int64_t q_start = 20, q_len = 8, k_start = 10, k_len = 25;
  std::vector<float> tile(heads * q_len * k_len);
  cpu::fox_tile({tile.data(), heads, q_start, q_len, k_start, k_len}, prefix.data(), seq, -1e30f);
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t r = 0; r < q_len; ++r)
      for (std::int64_t c = 0; c < k_len; ++c) {
        const std::int64_t i = q_start + r, j = k_start + c;
        const float got = tile[(h * q_len + r) * k_len + c];
        if (j > i) {
          EXPECT_EQ(got, -1e30f);
          continue;
        }
        double sum = 0;
        for (std::int64_t l = j + 1; l <= i; ++l) sum += logf[h * seq + l];
        EXPECT_NEAR(got, sum, 1e-5 * (1 + std::abs(sum)));
      }
  // Default mask value is −∞; a constant gate e^(−β) is ALiBi with slope β on the causal side.
  std::vector<float> constant(seq, -0.25f);
  std::vector<double> p2(seq);
  cpu::fox_prefix_sums(constant.data(), 1, seq, p2.data());
  std::vector<float> fox(seq * seq), alibi(seq * seq);
  cpu::fox_tile({fox.data(), 1, 0, seq, 0, seq}, p2.data(), seq);
  const float slope = 0.25f;
  cpu::alibi_tile({alibi.data(), 1, 0, seq, 0, seq}, &slope);
  for (std::int64_t i = 0; i < seq; ++i)
    for (std::int64_t j = 0; j < seq; ++j) {
      if (j > i) EXPECT_TRUE(std::isinf(fox[i * seq + j]) && fox[i * seq + j] < 0);
      else EXPECT_NEAR(fox[i * seq + j], alibi[i * seq + j], 1e-5);
    }
}

TEST(score_bias, bad_arguments) {
  std::vector<float> tile(16), slopes(2, 0.5f);
  std::vector<double> prefix(8);
  EXPECT_THROW(cpu::alibi_tile({nullptr, 1, 0, 2, 0, 2}, slopes.data()), input_error);
  EXPECT_THROW(cpu::alibi_tile({tile.data(), 1, 0, 2, 0, 2}, nullptr), input_error);
  EXPECT_THROW(cpu::alibi_tile({tile.data(), -1, 0, 2, 0, 2}, slopes.data()), input_error);
  EXPECT_THROW(cpu::alibi_tile({tile.data(), 1, -3, 2, 0, 2}, slopes.data()), input_error);
  EXPECT_THROW(cpu::alibi_tile({tile.data(), 1, 0, 2, 0, -2}, slopes.data()), input_error);
  EXPECT_THROW(cpu::fox_tile({tile.data(), 1, 3, 2, 0, 2}, prefix.data(), 4), input_error);
  EXPECT_THROW(cpu::fox_tile({tile.data(), 1, 0, 2, 3, 2}, prefix.data(), 4), input_error);
  const float positive[2] = {0.1f, -0.2f};
  EXPECT_THROW(cpu::fox_prefix_sums(positive, 1, 2, prefix.data()), input_error);
  const float nan[1] = {NAN};
  EXPECT_THROW(cpu::fox_prefix_sums(nan, 1, 1, prefix.data()), input_error);
  EXPECT_THROW(cpu::alibi_slope_grad({nullptr, 1, 0, 2, 0, 2}, tile.data(), nullptr), input_error);
  try {
    cpu::alibi_tile({tile.data(), 1, 0, 2, 0, 2}, nullptr);
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find("slopes"), std::string::npos);
  }
}

}  // namespace
}  // namespace grape::test
