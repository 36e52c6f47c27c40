// The gradient laws: a learnable bias's gradient against central differences of its own bias()
// (bias_gradient) and the fused backward's parameter gradients against a dense float64 backward
// (attention_gradient). The tutorial's learnable log-distance bias passes both; the same bias with
// its gradient off by a factor of −3 fails both, with a shrunk counterexample. Every built-in with a
// parameter gradient passes them (builtins_test.cpp).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

#include "grape/check/checker.hpp"
#include "log_distance.hpp"

namespace grape {
namespace {

/// The tutorial's bias with its slopes' gradient multiplied by −3; bias() is right.
struct bad_gradient_bias : log_distance_bias {
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    log_distance_bias::accumulate_grad(h, m, n, -3 * g, acc);
  }
};

struct bad_gradient : encoding<translation<1>, no_representation, score_bias<bad_gradient_bias>> {
  static constexpr std::string_view name = "log_distance_bad_gradient";
  static constexpr std::string_view summary = "the tutorial's bias, its gradient times -3";
  static constexpr law_set claims = log_distance::claims;
  using params = log_distance::params;
  static params random_params(std::mt19937_64& rng) { return log_distance::random_params(rng); }
  static instance make(const params& p) { return {{log_distance::make(p).bias}, p.head_dim}; }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    return log_distance::reference_bias(p, h, m, n);
  }
};

TEST(GradientLaws, TheTutorialsLearnableBiasPasses) {
  const auto report = check<log_distance>(check_options{});
  EXPECT_TRUE(report.passed()) << report.table();
  for (const char* name : {"bias_gradient", "attention_gradient"}) {
    const auto* r = report.find(name);
    ASSERT_NE(r, nullptr) << name << "\n" << report.table();
    EXPECT_TRUE(r->claimed);
    EXPECT_EQ(r->status, law_status::holds) << report.table();
    EXPECT_EQ(r->trials, 100);
  }
  EXPECT_EQ(report.find("frequency_gradient"), nullptr) << "a bias has no frequencies\n" << report.table();
}

TEST(GradientLaws, AGradientOffByMinusThreeFailsBoth) {
  const auto report = check<bad_gradient>(check_options{});
  EXPECT_FALSE(report.passed());
  for (const char* name : {"bias_gradient", "attention_gradient"}) {
    const auto* r = report.find(name);
    ASSERT_NE(r, nullptr) << name << "\n" << report.table();
    EXPECT_EQ(r->status, law_status::fails) << report.table();
    ASSERT_TRUE(r->example) << report.table();
    const auto& e = *r->example;
    EXPECT_GT(e.error, e.tolerance);
    EXPECT_NEAR(e.lhs / e.rhs, -3.0, 1e-3) << name << ": " << e.lhs << " vs " << e.rhs;
  }
  // Shrunk: one logit, at the smallest positions where the bias depends on its slope.
  const auto& bias = *report.find("bias_gradient")->example;
  EXPECT_EQ(bias.positions.rfind("logits (h, m, n): (0, ", 0), 0u) << bias.positions;
  EXPECT_EQ(bias.positions.find(") ("), std::string::npos) << "more than one logit: " << bias.positions;
}

}  // namespace
}  // namespace grape
