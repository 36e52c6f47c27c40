// The mutation suite: deliberately broken encodings, each claiming the laws its correct twin
// claims. Every one must be caught within the default trial count, with a shrunk counterexample
// whose error exceeds the stated tolerance.
#include <gtest/gtest.h>

#include <cmath>

#include "cyclic_group.hpp"
#include "grape/check/builtin_checks.hpp"

namespace grape {
namespace {

// Expects `which` to fail in E's report with a counterexample; returns it for further assertions.
template <class E>
counterexample expect_caught(law which) {
  const auto report = check<E>(check_options{});
  EXPECT_FALSE(report.passed()) << report.table();
  const auto* r = report.find(which);
  EXPECT_NE(r, nullptr) << to_string(which) << " not checked\n" << report.table();
  if (!r) return {};
  EXPECT_EQ(r->status, law_status::fails) << report.table();
  EXPECT_LE(r->trials, check_options{}.trials) << "caught only after the default trial count";
  EXPECT_TRUE(r->example.has_value()) << report.table();
  if (!r->example) return {};
  EXPECT_GT(r->example->error, r->example->tolerance);
  return *r->example;
}

template <class Rep, class Inject = rotate_qk<layout_kind::interleaved>, class G = translation<Rep::rank>>
struct mutant_base : encoding<G, Rep, Inject> {
  static constexpr std::string_view summary = "a deliberately broken encoding";
  static constexpr law_set claims = rotary_laws;
  struct params {
    int head_dim;
  };
  static params random_params(std::mt19937_64& rng) { return {detail::pick(rng, {4, 8, 16})}; }
};

// 1. A generator that is not skew-symmetric: exp(tL) is not a rotation.
struct non_skew_generator : mutant_base<skew_generators<1>> {
  static constexpr std::string_view name = "non_skew_generator";
  static instance make(const params& p) {
    std::mt19937_64 rng(p.head_dim);
    Eigen::MatrixXd L = planes_in_basis(detail::random_orthogonal(rng, p.head_dim), rope_inv_freq(p.head_dim, 100), 0);
    L(0, 1) += 0.25;  // a symmetric part sneaks in
    L(1, 0) += 0.25;
    return {skew_generators<1>({L}), p.head_dim, 1.0};
  }
};
TEST(Mutants, NonSkewGenerator) {
  expect_caught<non_skew_generator>(law::reference_agreement);
  const auto report = check<non_skew_generator>(check_options{10, 1});
  ASSERT_EQ(report.notes.size(), 1u) << report.table();  // the dropped symmetric part is named
  EXPECT_NE(report.table().find("note: head 0: a generator has a symmetric part"), std::string::npos) << report.table();
}

// 2. Two position axes with generators that do not commute: ρ(m)ᵀρ(n) is not ρ(n − m).
struct non_commuting_2d : mutant_base<skew_generators<2>> {
  static constexpr std::string_view name = "non_commuting_2d";
  static instance make(const params& p) {
    std::mt19937_64 rng(p.head_dim);
    const auto theta = rope_inv_freq(p.head_dim, 100);
    return {skew_generators<2>({planes_in_basis(detail::random_orthogonal(rng, p.head_dim), theta, 0),
                                planes_in_basis(detail::random_orthogonal(rng, p.head_dim), theta, 0)}),
            p.head_dim, 1.0};
  }
};
TEST(Mutants, NonCommutingGenerators) {
  expect_caught<non_commuting_2d>(law::relative);
  expect_caught<non_commuting_2d>(law::homomorphism);
}

// 3. Q rotated in the half-split layout, K in the interleaved one (the classic weight-conversion bug).
struct layout_mismatch : mutant_base<rotation_planes<1>, rotate_qk<layout_kind::half_split, layout_kind::interleaved>> {
  static constexpr std::string_view name = "layout_mismatch";
  static instance make(const params& p) {
    return {rotation_planes<1>::from_inv_freq(rope_inv_freq(p.head_dim, 10000)), p.head_dim, 1.0};
  }
};
TEST(Mutants, QHalfSplitKInterleaved) {
  const auto c = expect_caught<layout_mismatch>(law::score_invariance);
  EXPECT_NE(c.positions.find("t=(1)"), std::string::npos) << "shrinks to a shift of one: " << c.positions;
}

// 4. Keys rotated for the next position (an off-by-one in the key's position id).
struct keys_shifted_planes : rotation_planes<1> {
  using rotation_planes<1>::rotation_planes;
  explicit keys_shifted_planes(rotation_planes<1> p) : rotation_planes<1>(std::move(p)) {}
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(std::array<std::int64_t, 1>{c[0] + 1}, x, y);
  }
};
struct keys_shifted : mutant_base<keys_shifted_planes> {
  static constexpr std::string_view name = "keys_shifted";
  static instance make(const params& p) {
    return {keys_shifted_planes(rotation_planes<1>::from_inv_freq(rope_inv_freq(p.head_dim, 10000))), p.head_dim, 1.0};
  }
};
TEST(Mutants, KeysShiftedByOne) {
  const auto c = expect_caught<keys_shifted>(law::reference_agreement);
  EXPECT_NE(c.positions.find("key"), std::string::npos) << c.positions;
}

// 5. A bias that leaks the key's absolute position: not translation invariant.
struct leaky_alibi_bias : alibi_bias {
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return alibi_bias::bias(h, m, n) - 1e-3 * slopes[h] * static_cast<double>(n[0]);
  }
};
struct asymmetric_bias : encoding<translation<1>, no_representation, score_bias<leaky_alibi_bias>> {
  static constexpr std::string_view name = "asymmetric_bias";
  static constexpr std::string_view summary = "ALiBi plus a term in the key position";
  static constexpr law_set claims = law::group | law::score_invariance;
  using params = alibi::params;
  static params random_params(std::mt19937_64& rng) { return alibi::random_params(rng); }
  static instance make(const params& p) { return {{alibi::make(p).bias}, p.head_dim}; }
};
TEST(Mutants, AsymmetricBias) { expect_caught<asymmetric_bias>(law::score_invariance); }

// 5b. A bias that depends on the offset alone but overflows: exp(slope·(n − m)) is +∞ on both
// sides of the score law for long offsets. Two equal infinities are an overflow, not agreement:
// the law fails with the non-finite message (it used to hold).
struct exploding_bias : alibi_bias {
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return std::exp(slopes[h] * static_cast<double>(n[0] - m[0]));
  }
};
struct overflowing_bias : encoding<translation<1>, no_representation, score_bias<exploding_bias>> {
  static constexpr std::string_view name = "overflowing_bias";
  static constexpr std::string_view summary = "exp(slope·(n − m)): relative, and infinite past a few thousand";
  static constexpr law_set claims = law::group | law::score_invariance;
  using params = alibi::params;
  static params random_params(std::mt19937_64& rng) { return alibi::random_params(rng); }
  static instance make(const params& p) { return {{alibi::make(p).bias}, p.head_dim}; }
};
TEST(Mutants, OverflowIsAFailureNotAgreement) {
  const auto report = check<overflowing_bias>(check_options{});
  const auto* r = report.find(law::score_invariance);
  ASSERT_NE(r, nullptr) << report.table();
  EXPECT_EQ(r->status, law_status::fails) << report.table();
  ASSERT_TRUE(r->example.has_value()) << report.table();
  EXPECT_NE(r->example->what.find("not finite"), std::string::npos) << report.table();
  EXPECT_FALSE(std::isfinite(r->example->lhs) && std::isfinite(r->example->rhs)) << report.table();
}

// 5c. A bias written for non-negative positions only: −slope·| |m| − |n| | is ALiBi while m, n >= 0
// and not translation invariant across 0. Only draws of both signs catch it.
struct unsigned_alibi_bias : alibi_bias {
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return alibi_bias::bias(h, {std::abs(m[0])}, {std::abs(n[0])});
  }
};
struct alibi_of_magnitudes : encoding<translation<1>, no_representation, score_bias<unsigned_alibi_bias>> {
  static constexpr std::string_view name = "alibi_of_magnitudes";
  static constexpr std::string_view summary = "ALiBi of |m| and |n|";
  static constexpr law_set claims = law::group | law::score_invariance;
  using params = alibi::params;
  static params random_params(std::mt19937_64& rng) { return alibi::random_params(rng); }
  static instance make(const params& p) { return {{alibi::make(p).bias}, p.head_dim}; }
};
TEST(Mutants, BiasOfMagnitudesFailsAcrossZero) {
  const auto c = expect_caught<alibi_of_magnitudes>(law::score_invariance);
  EXPECT_NE(c.positions.find('-'), std::string::npos) << c.positions;  // a negative position
}

// 6. The power-of-two slope rule used for 12 heads (attention-gym's example does this).
struct alibi_pow2_rule : encoding<translation<1>, no_representation, score_bias<alibi_bias>> {
  static constexpr std::string_view name = "alibi_pow2_rule";
  static constexpr std::string_view summary = "ALiBi slopes 2^(-8(h+1)/H) for any H";
  static constexpr law_set claims = law::group | law::score_invariance | law::reference_agreement;
  using params = alibi::params;
  static params random_params(std::mt19937_64&) { return {12, 8, 8.0, {}}; }
  static instance make(const params& p) {
    std::vector<double> s(p.heads);
    for (int h = 0; h < p.heads; ++h) s[h] = std::exp2(-8.0 * (h + 1) / p.heads);
    return {{s}, p.head_dim};
  }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    return alibi::reference_bias(p, h, m, n);
  }
};
TEST(Mutants, PowerOfTwoSlopeRuleFor12Heads) {
  const auto c = expect_caught<alibi_pow2_rule>(law::reference_agreement);
  EXPECT_NE(c.positions.find("head="), std::string::npos);
}

// 7. A frequency that depends on the absolute position: θ(m) = θ·(1 + 10⁻³·m).
struct drifting_planes : rotation_planes<1> {
  explicit drifting_planes(rotation_planes<1> p) : rotation_planes<1>(std::move(p)) {}
  template <class T>
  void apply(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    for (int i = 0; i < planes(); ++i) {
      const double a = static_cast<double>(c[0]) * frequencies()[i][0] * (1.0 + 1e-3 * static_cast<double>(c[0]));
      const auto r = math::rotate_pair<T>(x[2 * i], x[2 * i + 1], static_cast<T>(std::sin(a)), static_cast<T>(std::cos(a)));
      y[2 * i] = r.first;
      y[2 * i + 1] = r.second;
    }
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(c, x, y);
  }
};
struct position_dependent_frequency : mutant_base<drifting_planes> {
  static constexpr std::string_view name = "position_dependent_frequency";
  static instance make(const params& p) {
    return {drifting_planes(rotation_planes<1>::from_inv_freq(rope_inv_freq(p.head_dim, 10000))), p.head_dim, 1.0};
  }
};
TEST(Mutants, FrequencyDependsOnAbsolutePosition) {
  expect_caught<position_dependent_frequency>(law::homomorphism);
  expect_caught<position_dependent_frequency>(law::relative);
}

// 8. A sign error in the rank-2 closed form: the L² term subtracted instead of added.
struct rank2_sign_error : rank2_rotation {
  explicit rank2_sign_error(rank2_rotation r) : rank2_rotation(std::move(r)) {}
  template <class T>
  void apply(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    // With r = exp(tL)x = x + f1·Lx + f2·L²x and s = exp(−tL)x = x − f1·Lx + f2·L²x, r + s − 2x is
    // 2·f2·L²x, so r − (r + s − 2x) = x + f1·Lx − f2·L²x: the closed form with the f2 sign flipped.
    std::vector<T> r(dim()), s(dim());
    rank2_rotation::apply(c, x, r.data());
    rank2_rotation::apply(std::array<std::int64_t, 1>{-c[0]}, x, s.data());
    for (int i = 0; i < dim(); ++i) y[i] = r[i] - (r[i] + s[i] - 2 * x[i]);  // f2 term flipped
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(c, x, y);
  }
};
struct grape_m_sign_error : mutant_base<rank2_sign_error> {
  static constexpr std::string_view name = "grape_m_sign_error";
  static instance make(const params& p) {
    std::mt19937_64 rng(p.head_dim);
    return {rank2_sign_error(rank2_rotation(detail::normal_vector(rng, p.head_dim), detail::normal_vector(rng, p.head_dim), 0.1)),
            p.head_dim, 1.0};
  }
};
TEST(Mutants, SignErrorInClosedForm) {
  expect_caught<grape_m_sign_error>(law::reference_agreement);
  expect_caught<grape_m_sign_error>(law::norm_preservation);
}

// 9. An additive lift whose A is not nilpotent (vᵀu != 0): I + tA is no longer a homomorphism.
struct non_nilpotent_lift : encoding<translation<1>, unipotent_lift, lift_qk> {
  static constexpr std::string_view name = "non_nilpotent_lift";
  static constexpr std::string_view summary = "I + tA with A² != 0";
  static constexpr law_set claims = grape_a::claims;
  using params = grape_a::params;
  static params random_params(std::mt19937_64& rng) { return grape_a::random_params(rng); }
  static instance make(const params& p) {
    instance inst;
    inst.head_dim = p.head_dim;
    for (double s : alibi_slopes(p.heads)) {
      std::vector<double> u(p.head_dim + 2, 0.0), v(p.head_dim + 2, 0.0);
      u[p.head_dim + 1] = -s;
      v[p.head_dim] = 1.0;
      v[p.head_dim + 1] = 0.5;  // vᵀu = −s/2 != 0
      inst.reps.emplace_back(u, v);
    }
    return inst;
  }
};
TEST(Mutants, NonNilpotentLift) { expect_caught<non_nilpotent_lift>(law::homomorphism); }

// 10. The float32 kernel path with the textbook angle float(m)·θ: exact near 0, wrong far out.
struct float_angle_planes : rotation_planes<1> {
  explicit float_angle_planes(rotation_planes<1> p) : rotation_planes<1>(std::move(p)) {}
  using rotation_planes<1>::apply;
  void apply(const std::array<std::int64_t, 1>& c, const float* x, float* y) const {
    for (int i = 0; i < planes(); ++i) {
      const float a = static_cast<float>(c[0]) * static_cast<float>(frequencies()[i][0]);
      const auto r = math::rotate_pair<float>(x[2 * i], x[2 * i + 1], std::sin(a), std::cos(a));
      y[2 * i] = r.first;
      y[2 * i + 1] = r.second;
    }
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(c, x, y);
  }
};
struct float32_angle : mutant_base<float_angle_planes> {
  static constexpr std::string_view name = "float32_angle";
  static instance make(const params& p) {
    return {float_angle_planes(rotation_planes<1>::from_inv_freq(rope_inv_freq(p.head_dim, 10000))), p.head_dim, 1.0};
  }
};
TEST(Mutants, Float32AngleLosesPrecisionAtLongPositions) {
  expect_caught<float32_angle>(law::float32_agreement);
}

// 11. A user-defined cyclic group with frequencies that are not periodic in it.
struct cyclic_not_periodic : mutant_base<rotation_planes<1>, rotate_qk<layout_kind::half_split>, cyclic<12>> {
  static constexpr std::string_view name = "cyclic_not_periodic";
  static constexpr std::int64_t position_limit = 12;
  static instance make(const params& p) {
    return {rotation_planes<1>::from_inv_freq(rope_inv_freq(p.head_dim, 10000)), p.head_dim, 1.0};
  }
};
TEST(Mutants, CyclicGroupWithNonPeriodicFrequencies) { expect_caught<cyclic_not_periodic>(law::homomorphism); }

// 12. A learned absolute table that claims the score law.
struct learned_claims_relative : encoding<translation<1>, no_representation, add_embedding<learned_table>> {
  static constexpr std::string_view name = "learned_claims_relative";
  static constexpr std::string_view summary = "a learned table claiming the score law";
  static constexpr law_set claims = law::group | law::score_invariance;
  static constexpr std::int64_t position_limit = learned_absolute::position_limit;
  using params = learned_absolute::params;
  static params random_params(std::mt19937_64& rng) { return learned_absolute::random_params(rng); }
  static instance make(const params& p) { return learned_absolute::make(p); }
};
TEST(Mutants, AbsoluteTableClaimingScoreLaw) { expect_caught<learned_claims_relative>(law::score_invariance); }

// 13. The position carried in float32 (exact to 2^24 only): right for every position a short
// context uses, wrong past 2^24. Caught by default because a share of every law's positions is
// drawn log-uniformly up to the encoding's range; a check limited to 2^20 misses it.
struct float_position_planes : rotation_planes<1> {
  explicit float_position_planes(rotation_planes<1> p) : rotation_planes<1>(std::move(p)) {}
  template <class T>
  void apply(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    const std::int64_t rounded = static_cast<std::int64_t>(static_cast<float>(c[0]));
    rotation_planes<1>::apply(std::array<std::int64_t, 1>{rounded}, x, y);
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(c, x, y);
  }
};
struct float32_position : mutant_base<float_position_planes> {
  static constexpr std::string_view name = "float32_position";
  static instance make(const params& p) {
    return {float_position_planes(rotation_planes<1>::from_inv_freq(rope_inv_freq(p.head_dim, 10000))), p.head_dim, 1.0};
  }
};
TEST(Mutants, PositionInFloat32FailsOnlyPast2To24) {
  const auto c = expect_caught<float32_position>(law::reference_agreement);
  const auto at = c.positions.find("m=(");
  ASSERT_NE(at, std::string::npos) << c.positions;
  EXPECT_GT(std::abs(std::stoll(c.positions.substr(at + 3))), std::int64_t{1} << 24) << c.positions;
  check_options short_range;
  short_range.max_position = std::int64_t{1} << 20;
  const auto report = check<float32_position>(short_range);
  EXPECT_TRUE(report.passed()) << report.table();
  EXPECT_NE(report.table().find("narrowed by max_position"), std::string::npos) << report.table();
}

// 14. A kernel table that is not the representation's: apply (float64 and the float32 element
// path) is RoPE with base 10000, the view the kernels take is built with base 10240 (a mistyped
// constant in the table builder). Only laws that run the compiled kernels see it.
struct stale_view_planes : rotation_planes<1> {
  rotation_planes<1> table;
  stale_view_planes(rotation_planes<1> p, rotation_planes<1> t) : rotation_planes<1>(std::move(p)), table(std::move(t)) {}
  auto view() const { return table.view(); }
};
struct stale_kernel_table : mutant_base<stale_view_planes> {
  static constexpr std::string_view name = "stale_kernel_table";
  static instance make(const params& p) {
    return {stale_view_planes(rotation_planes<1>::from_inv_freq(rope_inv_freq(p.head_dim, 10000)),
                              rotation_planes<1>::from_inv_freq(rope_inv_freq(p.head_dim, 10240))),
            p.head_dim, 1.0};
  }
};
TEST(Mutants, KernelTableDiffersFromTheRepresentation) {
  const auto report = check<stale_kernel_table>(check_options{});
  EXPECT_EQ(report.find(law::float32_agreement)->status, law_status::holds) << report.table();
  for (const char* kernel : {"cpu_kernel", "cuda_body_emulated"}) {
    const auto* r = report.find(std::string_view(kernel));
    ASSERT_NE(r, nullptr) << report.table();
    EXPECT_EQ(r->status, law_status::fails) << report.table();
    ASSERT_TRUE(r->example.has_value());
    EXPECT_GT(r->example->error, r->example->tolerance);
    EXPECT_NE(r->example->what.find("vs float64 encode"), std::string::npos) << r->example->what;
  }
  // The fused attention rotates through the same table: its output is not the encoding's, yet
  // still relative (the stale table is RoPE with another base).
  const auto* fused = report.find(std::string_view("attention_kernel"));
  ASSERT_NE(fused, nullptr) << report.table();
  EXPECT_EQ(fused->status, law_status::fails) << report.table();
  EXPECT_EQ(report.find(std::string_view("attention_shift"))->status, law_status::holds) << report.table();
}

// 15. ALiBi with the sign of the bias flipped (a reward for distance), its gradient flipped with it:
// every law of its own holds, so only an independent reference formula catches it, and the report
// names that reference. (With ALiBi's gradient left as it was, bias_gradient catches it too:
// gradient_laws_test.cpp.)
struct rewarding_alibi_bias : alibi_bias {
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return -alibi_bias::bias(h, m, n);
  }
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    alibi_bias::accumulate_grad(h, m, n, -g, acc);
  }
};
template <bool WithReference>
struct sign_flipped_alibi : encoding<translation<1>, no_representation, score_bias<rewarding_alibi_bias>> {
  static constexpr std::string_view name = "sign_flipped_alibi";
  static constexpr std::string_view summary = "+slope·|m − n|";
  static constexpr law_set claims =
      WithReference ? law::group | law::score_invariance | law::reference_agreement : law::group | law::score_invariance;
  using params = alibi::params;
  static params random_params(std::mt19937_64& rng) { return alibi::random_params(rng); }
  static instance make(const params& p) { return {{alibi::make(p).bias}, p.head_dim}; }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n)
    requires WithReference
  {
    return alibi::reference_bias(p, h, m, n);
  }
};
TEST(Mutants, WrongSignBiasCaughtOnlyByAReference) {
  expect_caught<sign_flipped_alibi<true>>(law::reference_agreement);
  const auto alone = check<sign_flipped_alibi<false>>(check_options{});
  EXPECT_TRUE(alone.passed()) << alone.table();  // nothing to compare with: the gap is shown
  EXPECT_EQ(alone.reference.rfind("none", 0), 0u) << alone.reference;
  EXPECT_NE(alone.table().find("reference: none"), std::string::npos) << alone.table();
}

// 16. ALiBi whose bias converts positions to float32 before taking the distance (as a bias kernel
// that holds positions in float does): exact below 2^24, a staircase past it. The fused attention
// kernel shows it on its own output: moving every position by the same t changes the result.
struct float_position_alibi_bias : alibi_bias {
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    const double d = static_cast<double>(static_cast<float>(m[0])) - static_cast<double>(static_cast<float>(n[0]));
    return -slopes[h] * std::abs(d);
  }
};
struct float32_alibi_positions : encoding<translation<1>, no_representation, score_bias<float_position_alibi_bias>> {
  static constexpr std::string_view name = "float32_alibi_positions";
  static constexpr std::string_view summary = "ALiBi with positions rounded to float32";
  static constexpr law_set claims = law::group | law::score_invariance;
  using params = alibi::params;
  static params random_params(std::mt19937_64& rng) { return alibi::random_params(rng); }
  static instance make(const params& p) { return {{alibi::make(p).bias}, p.head_dim}; }
};
TEST(Mutants, AlibiPositionsInFloat32ChangeTheFusedAttentionOutput) {
  const auto report = check<float32_alibi_positions>(check_options{});
  const auto* r = report.find(std::string_view("attention_shift"));
  ASSERT_NE(r, nullptr) << report.table();
  EXPECT_TRUE(r->claimed);
  EXPECT_EQ(r->status, law_status::fails) << report.table();
  ASSERT_TRUE(r->example.has_value());
  EXPECT_GT(r->example->error, r->example->tolerance);
  EXPECT_NE(r->example->positions.find("shifted by"), std::string::npos) << r->example->positions;
}

}  // namespace
}  // namespace grape
