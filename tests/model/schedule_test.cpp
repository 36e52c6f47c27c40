// Schedules evaluated directly: dynamic NTK's length dependence, the float32 reference table,
// ALiBi pins, and the parameter checks of the schedule API.
#include <gtest/gtest.h>

#include <cmath>

#include "formulas.hpp"
#include "grape/detail/error.hpp"
#include "grape/math/bias.hpp"
#include "model/rope_schedule.hpp"

namespace {

using namespace grape;
namespace tf = grape::test_formulas;

rope_schedule dynamic_schedule() {
  rope_schedule s;
  s.type = rope_type::dynamic;
  s.rotary_dim = 128;
  s.base = 10000.0;
  s.factor = 2.0;
  s.max_position_embeddings = 4096;
  return s;
}

TEST(Schedule, DynamicIsUnchangedUpToMaxAndRecomputedBeyond) {
  const auto s = dynamic_schedule();
  const auto at_max = evaluate(s, 4096);
  EXPECT_FALSE(at_max.scaled);
  const auto plain = tf::rope_default(10000.0, 128);
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(tf::near_rel(at_max.inv_freq[i], plain[i], 1e-14));
  const auto beyond = evaluate(s, 10000);
  EXPECT_TRUE(beyond.scaled);
  const auto want = tf::rope_dynamic(10000.0, 128, 2.0, 4096, 10000);
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(tf::near_rel(beyond.inv_freq[i], want[i], 1e-14));
  EXPECT_LT(beyond.inv_freq[63], at_max.inv_freq[63]);
  // A shorter sequence after a longer one gets the original table back (no hidden state).
  EXPECT_EQ(evaluate(s, 100).inv_freq, at_max.inv_freq);
}

TEST(Schedule, LinearAndNtk) {
  rope_schedule s;
  s.rotary_dim = 64;
  s.factor = 4.0;
  s.type = rope_type::linear;
  const auto lin = evaluate(s, 0);
  const auto want_lin = tf::rope_linear(10000.0, 64, 4.0);
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(tf::near_rel(lin.inv_freq[i], want_lin[i], 1e-14));
  s.type = rope_type::ntk;
  const auto ntk = evaluate(s, 0);
  const auto want_ntk = tf::rope_ntk(10000.0, 64, 4.0);
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(tf::near_rel(ntk.inv_freq[i], want_ntk[i], 1e-14));
  EXPECT_EQ(ntk.bands.front(), band_kind::kept);
  EXPECT_EQ(ntk.bands.back(), band_kind::interpolated);
  // NTK scales the last plane by exactly the factor.
  EXPECT_TRUE(tf::near_rel(ntk.inv_freq[31], tf::rope_default(10000.0, 64)[31] / 4.0, 1e-13));
}

TEST(Schedule, Float32ReferenceRefusesABaseBeyondFloat32) {
  rope_schedule s;
  s.rotary_dim = 64;
  s.base = 1e39;  // finite in double, infinite in float32
  EXPECT_EQ(evaluate(s, 0, frequency_precision::float64).inv_freq.size(), 32u);
  try {
    evaluate(s, 0, frequency_precision::float32_reference);
    FAIL() << "no error";
  } catch (const grape::input_error& e) {
    EXPECT_NE(std::string(e.what()).find("rope_theta 1e+39 is beyond float32"), std::string::npos) << e.what();
  }
}

TEST(Schedule, Float32ReferenceTableIsFloatRoundedAndClose) {
  rope_schedule s;
  s.type = rope_type::yarn;
  s.rotary_dim = 128;
  s.base = 1e6;
  s.factor = 4.0;
  s.original_max_position_embeddings = 32768;
  s.max_position_embeddings = 131072;
  const auto f64 = evaluate(s, 0, frequency_precision::float64);
  const auto f32 = evaluate(s, 0, frequency_precision::float32_reference);
  EXPECT_EQ(f32.precision, frequency_precision::float32_reference);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(static_cast<double>(static_cast<float>(f32.inv_freq[i])), f32.inv_freq[i]);
    EXPECT_TRUE(tf::near_rel(f32.inv_freq[i], f64.inv_freq[i], 2e-6)) << i;
  }
  // Plane 0 is 1 exactly in both; the reference's float32 table differs from float64 elsewhere.
  EXPECT_EQ(f32.inv_freq[0], 1.0);
  int differ = 0;
  for (int i = 0; i < 64; ++i) differ += f32.inv_freq[i] != f64.inv_freq[i];
  EXPECT_GT(differ, 0);
  // The default table in float32: 1 / pow(base, float(2i)/float(d)), pow within one float32 ulp
  // of the C library's (torch's SLEEF powf is a 1-ulp function; tests/python checks the bits
  // against transformers).
  s.type = rope_type::default_rope;
  const auto d32 = evaluate(s, 0, frequency_precision::float32_reference);
  for (int i = 0; i < 64; ++i) {
    const float libm = 1.0f / std::pow(1e6f, static_cast<float>(2 * i) / 128.0f);
    const float got = static_cast<float>(d32.inv_freq[i]);
    EXPECT_LE(std::fabs(got - libm), std::nextafter(libm, 2.0f) - libm) << i;
    EXPECT_TRUE(tf::near_rel(d32.inv_freq[i], 1.0 / std::pow(1e6, i / 64.0), 2e-7)) << i;
  }
}

TEST(Schedule, AlibiSlopesFor12HeadsArePinned) {
  const double want[12] = {std::exp2(-1.0), std::exp2(-2.0), std::exp2(-3.0), std::exp2(-4.0),
                           std::exp2(-5.0), std::exp2(-6.0), std::exp2(-7.0), std::exp2(-8.0),
                           std::exp2(-0.5), std::exp2(-1.5), std::exp2(-2.5), std::exp2(-3.5)};
  const auto formula = tf::alibi_slopes(12);
  for (int h = 0; h < 12; ++h) {
    EXPECT_DOUBLE_EQ(math::alibi_slope(h, 12), want[h]) << h;
    EXPECT_TRUE(tf::near_rel(formula[h], want[h], 1e-15)) << h;
  }
}

TEST(Schedule, ValidateRejectsOutOfRangeParameters) {
  rope_schedule s;
  s.rotary_dim = 63;
  EXPECT_THROW(validate(s, "x"), input_error);
  s.rotary_dim = 64;
  s.base = 1.0;
  EXPECT_THROW(validate(s, "x"), input_error);
  s.base = 10000.0;
  s.type = rope_type::linear;
  s.factor = 0.5;
  try {
    validate(s, "config.json: rope_scaling");
    FAIL() << "no error";
  } catch (const input_error& e) {
    EXPECT_STREQ(e.what(), "grape: config.json: rope_scaling.factor: must be >= 1 for linear (got 0.5)");
  }
  s.factor = std::nan("");
  EXPECT_THROW(validate(s, "x"), input_error);
  s.type = rope_type::longrope;
  s.factor = 2.0;
  s.original_max_position_embeddings = 10;
  s.short_factor.assign(31, 1.0);
  s.long_factor.assign(32, 1.0);
  EXPECT_THROW(validate(s, "x"), input_error);
  s.short_factor.assign(32, 1.0);
  s.long_factor[3] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(validate(s, "x"), input_error);
  s.long_factor[3] = 1.0;
  EXPECT_NO_THROW(validate(s, "x"));
}

TEST(Schedule, RopeTypeNames) {
  EXPECT_EQ(rope_type_from_string("su"), rope_type::longrope);
  EXPECT_EQ(rope_type_from_string("llama3"), rope_type::llama3);
  EXPECT_FALSE(rope_type_from_string("llama4"));
  for (auto t : {rope_type::default_rope, rope_type::linear, rope_type::ntk, rope_type::dynamic,
                 rope_type::yarn, rope_type::llama3, rope_type::longrope})
    EXPECT_EQ(rope_type_from_string(to_string(t)), t);
}

}  // namespace
