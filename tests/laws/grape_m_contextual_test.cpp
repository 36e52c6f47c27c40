// Contextual GRAPE-M (grape_m_contextual): logits pinned against values computed apart from grape,
// the checker's verdicts (the relative law holds on the real line of phases, not in the token
// index for fixed content), a mutant that turns only the key side and fails the phase laws, and
// the parameter errors.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "grape/check/builtin_checks.hpp"

namespace grape {
namespace {

// Two heads, per-head frequencies and phases (head 1's phases near 10^3).
grape_m_contextual::params pinned_params() {
  return {2, 4, 2, {0.9, 0.013, 0.25, 1.7}, {0.0, 0.31, 0.58, 1.2, 1.9, 1000.0, 1000.5, 1001.75, 1003.0, 1004.125}};
}

// Pinned: plain Python float64 (math only) of (R(Φ_m θ)q)ᵀ(R(Φ_n θ)k), half-split planes, on
// q = (0.3, -1.2, 0.8, 0.45), k = (-0.7, 0.2, 1.1, -0.35).
TEST(GrapeMContextual, LogitsMatchPinnedValues) {
  const auto inst = grape_m_contextual::make(pinned_params());
  const double q[4] = {0.3, -1.2, 0.8, 0.45}, k[4] = {-0.7, 0.2, 1.1, -0.35};
  struct pin {
    int h;
    std::int64_t m, n;
    double logit;
  };
  for (const pin& p : {pin{0, 0, 0, 0.2725000000000002}, pin{0, 3, 1, 0.7117239240779109},
                       pin{1, 4, 0, 1.0312885976624633}, pin{1, 2, 3, 0.29251558462060867}}) {
    const double got = inst.score(p.h, q, k, std::array<std::int64_t, 1>{p.m}, std::array<std::int64_t, 1>{p.n});
    EXPECT_NEAR(got, p.logit, 1e-12) << "head " << p.h << " m " << p.m << " n " << p.n;
  }
}

bool holds(const check_report& r, std::string_view law) {
  const auto* row = r.find(law);
  return row && row->status == law_status::holds;
}

TEST(GrapeMContextual, ThePhaseLawsHoldAndTheTokenIndexLawDoesNot) {
  const auto r = check<grape_m_contextual>(check_options{});
  EXPECT_TRUE(r.passed()) << r.table();
  EXPECT_TRUE(holds(r, "phase_shift_invariance")) << r.table();
  EXPECT_TRUE(holds(r, "phase_difference")) << r.table();
  const auto* fixed = r.find(law::score_invariance);
  ASSERT_NE(fixed, nullptr);
  EXPECT_EQ(fixed->status, law_status::fails) << r.table();
  ASSERT_TRUE(fixed->example.has_value());
}

/// A mutant: the key turned by its phase, the query not (GRAPE-AP v1's one-sided rotation, here
/// on a rotation). Its logit depends on Φ_n alone, so moving every phase changes it.
struct key_side_only : phase_rotation {
  double score_at_phases(int h, const double* q, const double* k, double, double phi_n) const {
    return phase_rotation::score_at_phases(h, q, k, 0.0, phi_n);
  }
  template <std::size_t N>
  double score(int h, const double* q, const double* k, const std::array<std::int64_t, N>& m,
               const std::array<std::int64_t, N>& n) const {
    return score_at_phases(h, q, k, phase(h, m[0]), phase(h, n[0]));
  }
};
struct rotate_key_by_phase {
  static constexpr std::string_view description = "rotate K only by per-token real phases";
  template <class R>
  using instance = key_side_only;
};
struct grape_m_key_side_only : encoding<translation<1>, no_representation, rotate_key_by_phase> {
  static constexpr std::string_view name = "grape_m_key_side_only";
  static constexpr std::string_view summary = "contextual GRAPE-M with the query left unturned";
  static constexpr law_set claims = law::group;
  using extra_laws = grape_m_contextual::extra_laws;
  static constexpr std::int64_t position_limit = grape_m_contextual::position_limit;
  static constexpr bool signed_positions = false;
  using params = grape_m_contextual::params;
  static params random_params(std::mt19937_64& rng) { return grape_m_contextual::random_params(rng); }
  static instance make(const params& p) { return {grape_m_contextual::make(p)}; }
};

TEST(GrapeMContextual, AOneSidedRotationFailsThePhaseLaws) {
  const auto r = check<grape_m_key_side_only>(check_options{});
  EXPECT_FALSE(r.passed()) << r.table();
  for (std::string_view law : {"phase_shift_invariance", "phase_difference"}) {
    const auto* row = r.find(law);
    ASSERT_NE(row, nullptr) << law;
    EXPECT_EQ(row->status, law_status::fails) << r.table();
    ASSERT_TRUE(row->example.has_value()) << law;
    EXPECT_GT(row->example->error, row->example->tolerance);
  }
}

std::string error_of(const grape_m_contextual::params& p) {
  try {
    grape_m_contextual::make(p);
  } catch (const input_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GrapeMContextual, BadParametersNameTheField) {
  auto p = pinned_params();
  p.phase_rows = 3;
  EXPECT_EQ(error_of(p), "grape: phase_rows: must be 1 or heads = 2 (got 3)");
  p = pinned_params();
  p.freqs.resize(3);
  EXPECT_EQ(error_of(p), "grape: freqs: must hold head_dim/2 = 2 or heads x head_dim/2 = 4 values (got 3)");
  p = pinned_params();
  p.head_dim = 5;
  EXPECT_EQ(error_of(p), "grape: head_dim: must be even and > 0 (got 5)");
  p = pinned_params();
  p.phases[7] = std::nan("");
  EXPECT_EQ(error_of(p), "grape: phases[7]: must be finite (got nan)");
  p = pinned_params();
  p.phases.pop_back();
  EXPECT_EQ(error_of(p), "grape: phases: must hold phase_rows x length values, length >= 1 (got 9)");
  const auto inst = grape_m_contextual::make(pinned_params());
  const double q[4] = {}, k[4] = {};
  EXPECT_THROW(inst.score(0, q, k, std::array<std::int64_t, 1>{5}, std::array<std::int64_t, 1>{0}), input_error);
}

}  // namespace
}  // namespace grape
