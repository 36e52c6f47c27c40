// The GRAPE paper's gated GRAPE-A and path-integral GRAPE-AP: biases pinned against values
// computed apart from grape, and the checker's verdicts on each — including the authors' own
// GRAPE-AP formula, which is not translation invariant (docs/grape-paper.md).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "grape/check/builtin_checks.hpp"
#include "grape_ap_reference.hpp"

namespace grape {
namespace {

// Pinned values: a float64 transcription in plain Python (math only) of grape-paper-code.md's
// formulas on these inputs, ALiBi slopes by the power-of-two rule with the interleaved extension
// (3 heads: 2^-4, 2^-8, 2^-2).
const std::vector<double> omega_logits = {0.3, -0.7, 1.1};
const std::vector<double> key_logits = {0.5, -1.0, 2.0, 0.25, -0.3, 0.8, -2.5, 1.5, 1.2, 0.0, -0.6, 0.9};
const std::vector<double> query_logits = {-0.4, 0.7, 1.3, -1.1, 0.2, -0.9, 0.6, 2.2, -1.5, 0.35, 0.05, -0.2};
const std::vector<double> projections = {0.9,  -0.2, 0.4,  1.1,  -0.5, 0.3, 0.8, -1.2, 0.1,  1.4, -0.7,
                                         0.6,  1.0,  -0.9, 0.2,  0.5,  -0.6, 0.5, 1.2, -0.3, 0.7, -1.1,
                                         0.4,  0.9,  1.3,  0.2,  -0.8, -0.4, -0.2, 0.6, 0.9,  1.5};

struct pin {
  int h;
  std::int64_t m, n;
  double key_gated, qk_gated;
};

double bias_of(const auto& inst, int h, std::int64_t m, std::int64_t n) {
  return inst.bias.bias(h, std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n});
}

TEST(GatedPathEncodings, GatedGrapeAMatchesPinnedValues) {
  const auto key = grape_a_key_gated::make({3, 8, omega_logits, key_logits});
  const auto qk = grape_a_qk_gated::make({3, 8, omega_logits, key_logits, query_logits});
  for (const pin& p : {pin{0, 3, 0, -0.15603895874069262, -0.20206766660321218},
                       pin{1, 3, 1, -0.003688839455864164, -0.010949600674999437},
                       pin{2, 2, 0, -1.0150317287800588, -1.5134039534594743},
                       pin{2, 3, 2, -0.15173562200535495, -0.35919041770977667}}) {
    EXPECT_NEAR(bias_of(key, p.h, p.m, p.n), p.key_gated, 1e-15) << p.h << " " << p.m << " " << p.n;
    EXPECT_NEAR(bias_of(qk, p.h, p.m, p.n), p.qk_gated, 1e-15) << p.h << " " << p.m << " " << p.n;
  }
  EXPECT_EQ(bias_of(key, 0, 2, 2), 0.0);
  EXPECT_EQ(bias_of(qk, 1, 1, 2), -INFINITY);
}

TEST(GatedPathEncodings, GrapeApMatchesPinnedValues) {
  const grape_ap_relative::params p{2, 8, 4, 1e-6, projections};
  const auto relative = grape_ap_relative::make(p);
  const auto reference = grape_ap_reference::make(p);
  struct ap_pin {
    int h;
    std::int64_t m, n;
    double reference, relative;
  };
  for (const ap_pin& x : {ap_pin{0, 3, 0, -0.16204343382405734, -0.11460319215728407},
                          ap_pin{1, 3, 1, -0.008136884087643898, -0.0037030126856045205},
                          ap_pin{1, 2, 0, -0.0057213209811039535, -0.004593460695178549},
                          ap_pin{0, 1, 0, -0.031558462897089794, -0.023626924873692907}}) {
    EXPECT_NEAR(bias_of(reference, x.h, x.m, x.n), x.reference, 1e-15) << x.h << " " << x.m << " " << x.n;
    EXPECT_NEAR(bias_of(relative, x.h, x.m, x.n), x.relative, 1e-15) << x.h << " " << x.m << " " << x.n;
  }
  // The same tokens one position later: the authors' term turns p̂_ℓ by ℓ + 1 and changes; grape's does not.
  EXPECT_NEAR(reference.bias.bias_with_content(0, 4, 1, 1), -0.12216204827204566, 1e-15);
  EXPECT_NEAR(reference.bias.bias_with_content(0, 2, 1, 1), -0.05425187412710916, 1e-15);  // one term
  EXPECT_EQ(relative.bias.bias_with_content(0, 4, 1, 1), bias_of(relative, 0, 3, 0));
}

// Independent transcriptions for random inputs over every causal pair of a window.
double softplus(double x) { return std::log(1 + std::exp(x)); }

double gated_formula(const std::vector<double>& w, const std::vector<double>& zk, const std::vector<double>* zq,
                     int heads, std::int64_t length, int h, std::int64_t m, std::int64_t n) {
  const double slope = reference::alibi_slopes(heads)[h];
  const double rate = softplus(zk[h * length + n]) + (zq ? softplus((*zq)[h * length + m]) : 0.0);
  return -static_cast<double>(m - n) * softplus(w[h]) * slope * rate;
}

TEST(GatedPathEncodings, GatedGrapeAMatchesTheFormulaForEveryPairAndHeadCount) {
  std::mt19937_64 rng(13);
  for (int heads : {1, 3, 6, 12}) {
    const std::int64_t length = 40;
    const auto w = detail::normal_vector(rng, heads), zk = detail::normal_vector(rng, heads * length, 2.0),
               zq = detail::normal_vector(rng, heads * length, 2.0);
    const auto key = grape_a_key_gated::make({heads, 8, w, zk});
    const auto qk = grape_a_qk_gated::make({heads, 8, w, zk, zq});
    for (int h = 0; h < heads; ++h)
      for (std::int64_t m = 0; m < length; ++m)
        for (std::int64_t n = 0; n <= m; ++n) {
          const double a = gated_formula(w, zk, nullptr, heads, length, h, m, n);
          const double b = gated_formula(w, zk, &zq, heads, length, h, m, n);
          ASSERT_NEAR(bias_of(key, h, m, n), a, 1e-14 * (1 + std::abs(a))) << heads << " " << h << " " << m << " " << n;
          ASSERT_NEAR(bias_of(qk, h, m, n), b, 1e-14 * (1 + std::abs(b))) << heads << " " << h << " " << m << " " << n;
        }
  }
}

/// The reference's GRAPE-AP: the row unrotated, p̂_ℓ turned by ℓ (every plane, half-split).
double ap_formula(const std::vector<double>& p, std::int64_t length, int P, int heads, int h, std::int64_t m,
                  std::int64_t n, bool rotate_row) {
  const double* row = &p[(h * length + m) * P];
  const double row_phase = rotate_row ? static_cast<double>(m) : 0.0;
  double sum = 0;
  for (std::int64_t l = n + 1; l <= m; ++l) {
    const double* key = &p[(h * length + l) * P];
    double ms = 0;
    for (int k = 0; k < P; ++k) ms += key[k] * key[k];
    const double r = 1 / std::sqrt(ms / P + 1e-6);
    // ⟨R(a)x, R(b)y⟩ summed plane by plane: the planes (k, k + P/2) turn by −a and −b.
    double dot = 0;
    for (int k = 0; k < P / 2; ++k) {
      const double xa = row[k] * std::cos(row_phase) + row[k + P / 2] * std::sin(row_phase);
      const double xb = -row[k] * std::sin(row_phase) + row[k + P / 2] * std::cos(row_phase);
      const double ya = r * (key[k] * std::cos(l) + key[k + P / 2] * std::sin(l));
      const double yb = r * (-key[k] * std::sin(l) + key[k + P / 2] * std::cos(l));
      dot += xa * ya + xb * yb;
    }
    sum += reference::alibi_slopes(heads)[h] * -std::log1p(std::exp(-dot / P));
  }
  return sum;
}

TEST(GatedPathEncodings, GrapeApMatchesTheFormulaForEveryPair) {
  std::mt19937_64 rng(17);
  for (int P : {2, 8}) {
    const int heads = 3;
    const std::int64_t length = 24;
    const auto p = detail::normal_vector(rng, heads * length * P);
    const auto relative = grape_ap_relative::make({heads, 8, P, 1e-6, p});
    const auto reference = grape_ap_reference::make({heads, 8, P, 1e-6, p});
    for (int h = 0; h < heads; ++h)
      for (std::int64_t m = 0; m < length; ++m)
        for (std::int64_t n = 0; n <= m; ++n) {
          const double a = ap_formula(p, length, P, heads, h, m, n, false);
          const double b = ap_formula(p, length, P, heads, h, m, n, true);
          ASSERT_NEAR(bias_of(reference, h, m, n), a, 1e-13 * (1 + std::abs(a))) << P << " " << h << " " << m << " " << n;
          ASSERT_NEAR(bias_of(relative, h, m, n), b, 1e-13 * (1 + std::abs(b))) << P << " " << h << " " << m << " " << n;
        }
  }
}

bool holds(const check_report& r, std::string_view law) {
  const auto* row = r.find(law);
  EXPECT_NE(row, nullptr) << r.encoding << ": " << law << " was not checked";
  return row && row->status == law_status::holds;
}

TEST(GatedPathEncodings, CheckerVerdictsOnTheGatedBiases) {
  for (const auto& r : {check<grape_a_key_gated>(check_options{}), check<grape_a_qk_gated>(check_options{})}) {
    EXPECT_TRUE(r.passed()) << r.table();
    for (std::string_view law : {"content_shift_invariance", "reference_agreement", "causal_mask", "nonpositive_bias"})
      EXPECT_TRUE(holds(r, law)) << r.table();
    // Fixed content at shifted positions: the gates differ, and the checker says so.
    EXPECT_FALSE(holds(r, "score_invariance")) << r.table();
    EXPECT_TRUE(r.find(law::score_invariance)->example.has_value());
  }
}

/// The key-gated bias claiming monotone_path, which a gated bias does not have: a large gate next
/// to the query and a small one before it make the nearer key the more penalised.
struct key_gated_claiming_monotone : detail::gated_grape_a {
  static constexpr std::string_view name = "key_gated_claiming_monotone";
  static constexpr std::string_view summary = "grape_a_key_gated, claiming monotone_path";
  using extra_laws = law_list<monotone_path_law>;
  using params = grape_a_key_gated::params;
  static params random_params(std::mt19937_64& rng) { return grape_a_key_gated::random_params(rng); }
  static instance make(const params& p) { return grape_a_key_gated::make(p); }
};

TEST(GatedPathEncodings, AGatedBiasIsNotMonotoneAlongThePath) {
  const auto r = check<key_gated_claiming_monotone>(check_options{});
  const auto* row = r.find(std::string_view("monotone_path"));
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->status, law_status::fails) << r.table();
  EXPECT_TRUE(row->example.has_value());
}

TEST(GatedPathEncodings, TheAuthorsGrapeApIsNotRelativeAndGrapesVariantIs) {
  const auto reference = check<grape_ap_reference>(check_options{});
  const auto* shift = reference.find(law::content_shift_invariance);
  ASSERT_NE(shift, nullptr);
  EXPECT_EQ(shift->status, law_status::fails) << reference.table();
  ASSERT_TRUE(shift->example.has_value());
  EXPECT_GT(shift->example->error, shift->example->tolerance);
  // Shrinking reaches a small query position ("m=(M) n=(N) ...").
  const std::string& at = shift->example->positions;
  ASSERT_EQ(at.rfind("m=(", 0), 0u) << at;
  EXPECT_LT(std::stoll(at.substr(3)), 16) << at;
  for (std::string_view law : {"reference_agreement", "causal_mask", "nonpositive_bias", "monotone_path"})
    EXPECT_TRUE(holds(reference, law)) << reference.table();

  const auto relative = check<grape_ap_relative>(check_options{});
  EXPECT_TRUE(relative.passed()) << relative.table();
  for (std::string_view law : {"content_shift_invariance", "reference_agreement", "causal_mask", "nonpositive_bias",
                               "monotone_path"})
    EXPECT_TRUE(holds(relative, law)) << relative.table();
  EXPECT_FALSE(holds(relative, "score_invariance")) << relative.table();
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GatedPathEncodings, BadParametersNameTheField) {
  EXPECT_EQ(error_of([] { grape_a_key_gated::make({2, 8, {}, {1.0, 2.0, 3.0}}); }),
            "grape: key_gate_logits: must hold heads x length values (got 3)");
  EXPECT_EQ(error_of([] { grape_a_qk_gated::make({1, 8, {}, {1.0, 2.0}, {1.0}}); }),
            "grape: query_gate_logits: must hold heads x length values (got 1)");
  EXPECT_EQ(error_of([] { grape_a_key_gated::make({1, 8, {0.0, 1.0}, {1.0}}); }),
            "grape: omega_logits: must hold heads = 1 values or none (got 2)");
  EXPECT_EQ(error_of([] { grape_a_key_gated::make({1, 8, {}, {NAN}}); }), "grape: key_gate_logits[0]: must be finite (got nan)");
  EXPECT_EQ(error_of([] { grape_ap_relative::make({1, 8, 3, 1e-6, {1, 2, 3}}); }),
            "grape: p_dim: must be even and > 0 (got 3)");
  EXPECT_EQ(error_of([] { grape_ap_relative::make({1, 8, 2, 0.0, {0, 0}}); }),
            "grape: projections: token 0 is zero and norm_eps is 0");
  const auto key = grape_a_key_gated::make({1, 8, {}, {1.0, 2.0}});
  EXPECT_EQ(error_of([&] { bias_of(key, 0, 2, 0); }), "grape: position: (2, 0) is outside the gate sequence [0, 2)");
}

}  // namespace
}  // namespace grape
