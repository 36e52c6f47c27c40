// Defects on the diagonal (m = n, every query's own key), which uniform position draws almost never
// reach: the checker draws edge cases in a fixed share of its positions (trial_inputs), and a NaN
// no longer vanishes in a maximum of errors (attention_case::compare).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "grape/check/checker.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/score_bias.hpp"

namespace grape {
namespace {

/// −|m − n|/8, except on the diagonal: NaN (Defect::nan) or +1 instead of 0 (Defect::slip).
enum class defect { nan, slip };

template <defect Defect>
struct diagonal_bias {
  int heads() const { return 2; }
  double bias(int, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    if (m[0] == n[0]) return Defect == defect::nan ? std::numeric_limits<double>::quiet_NaN() : 1.0;
    return -std::abs(static_cast<double>(m[0] - n[0])) / 8;
  }
};

template <defect Defect>
struct diagonal_defect : encoding<translation<1>, no_representation, score_bias<diagonal_bias<Defect>>> {
  using instance = typename encoding<translation<1>, no_representation, score_bias<diagonal_bias<Defect>>>::instance;
  static constexpr std::string_view name = "diagonal_defect";
  static constexpr std::string_view summary = "-|m - n|/8, wrong on the diagonal only";
  static constexpr law_set claims = law::group | law::score_invariance | law::reference_agreement;
  struct params {
    int head_dim;
  };
  static params random_params(std::mt19937_64&) { return {8}; }
  static instance make(const params& p) { return {{}, p.head_dim}; }
  static double reference_bias(const params&, int, std::int64_t m, std::int64_t n) {
    return -std::abs(static_cast<double>(m) - static_cast<double>(n)) / 8;
  }
};

const law_result& row(const check_report& r, std::string_view name) {
  const auto* l = r.find(name);
  EXPECT_NE(l, nullptr) << name << "\n" << r.table();
  static const law_result none;
  return l ? *l : none;
}

TEST(Diagonal, NaNOnTheDiagonalFailsTheAttentionLawAndTheScoreLaws) {
  const auto report = check<diagonal_defect<defect::nan>>(check_options{});
  EXPECT_FALSE(report.passed());
  // The fused attention always meets the diagonal; its NaN output used to vanish in std::max.
  const auto& attention = row(report, "attention_kernel");
  EXPECT_EQ(attention.status, law_status::fails) << report.table();
  ASSERT_TRUE(attention.example) << report.table();
  EXPECT_NE(attention.example->what.find("a value is not finite"), std::string::npos) << attention.example->what;
  // The score laws reach the diagonal only through the edge-case draws (m = n).
  for (const law l : {law::score_invariance, law::reference_agreement}) {
    const auto& r = row(report, to_string(l));
    EXPECT_EQ(r.status, law_status::fails) << report.table();
    ASSERT_TRUE(r.example) << report.table();
    EXPECT_NE(r.example->what.find("a value is not finite"), std::string::npos) << r.example->what;
  }
}

TEST(Diagonal, AFiniteSlipOnTheDiagonalIsCaughtByTheReferenceAtMEqualsN) {
  const auto report = check<diagonal_defect<defect::slip>>(check_options{});
  EXPECT_FALSE(report.passed());
  // Invariant still (the diagonal is +1 wherever it is), and consistent in the kernel.
  EXPECT_EQ(row(report, "score_invariance").status, law_status::holds) << report.table();
  EXPECT_EQ(row(report, "attention_kernel").status, law_status::holds) << report.table();
  const auto& reference = row(report, "reference_agreement");
  EXPECT_EQ(reference.status, law_status::fails) << report.table();
  ASSERT_TRUE(reference.example) << report.table();
  EXPECT_EQ(reference.example->positions, "m=(0) n=(0) head=0") << "shrunk to the origin's diagonal";
  EXPECT_EQ(reference.example->lhs, 1.0);
  EXPECT_EQ(reference.example->rhs, 0.0);
  EXPECT_NE(report.table().find("with 1 draw in 8 an edge case"), std::string::npos) << report.table();
}

}  // namespace
}  // namespace grape
