// What detect reports without a config: the schedule named from the fitted θ (tensors from a
// textbook float64 rotation written here), the attention factor, the offset without positions;
// and "no rotary structure found" on noise and unrelated arrays (a property over random inputs).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <random>

#include "../model/formulas.hpp"
#include "detect/detect.hpp"

namespace {

using namespace grape;
namespace tf = grape::test_formulas;

// Half-split textbook rotation of random x at `pos`, in float64, stored as float32.
detect::detect_input textbook_input(const std::vector<double>& theta, double af, const std::vector<std::int64_t>& pos,
                                    std::int64_t heads, std::uint64_t seed) {
  const auto tokens = static_cast<std::int64_t>(pos.size());
  const int d = static_cast<int>(theta.size()) * 2;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0, 1);
  detect::detect_input in;
  in.before = {tokens, heads, d, {}};
  for (std::int64_t i = 0; i < tokens * heads * d; ++i) in.before.values.push_back(static_cast<float>(n(rng)));
  in.after = in.before;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      for (int i = 0; i < d / 2; ++i) {
        const std::size_t a = static_cast<std::size_t>((t * heads + h) * d + i), b = a + d / 2;
        const double x = in.before.values[a], y = in.before.values[b], ang = static_cast<double>(pos[t]) * theta[i];
        in.after.values[a] = static_cast<float>(af * (x * std::cos(ang) - y * std::sin(ang)));
        in.after.values[b] = static_cast<float>(af * (y * std::cos(ang) + x * std::sin(ang)));
      }
  in.positions = pos;
  return in;
}

std::vector<std::int64_t> spread_positions(std::int64_t first, std::int64_t tokens) {
  std::vector<std::int64_t> p;
  // 0..11 (differences of 1 fix θ without aliasing), then spread up to ~9000 (precision).
  for (std::int64_t t = 0; t < tokens; ++t) p.push_back(first + (t < 12 ? t : t * t * 4));
  return p;
}

std::string schedule_of(const detect::detect_input& in) {
  const detect::detection d = detect::detect(in);
  EXPECT_TRUE(d.found) << d.reason;
  return d.schedule ? d.schedule->description : "none";
}

TEST(DetectIdentify, NamesTheScheduleAndItsParameters) {
  const auto pos = spread_positions(0, 48);
  EXPECT_EQ(schedule_of(textbook_input(tf::rope_default(10000.0, 64), 1.0, pos, 2, 1)), "default: base 10000");
  EXPECT_EQ(schedule_of(textbook_input(tf::rope_default(500000.0, 128), 1.0, pos, 2, 2)), "default: base 500000");
  EXPECT_EQ(schedule_of(textbook_input(tf::rope_linear(10000.0, 64, 4.0), 1.0, pos, 2, 3)),
            "linear: base 10000, factor 4");
  EXPECT_EQ(schedule_of(textbook_input(tf::rope_llama3(500000.0, 128, 8.0, 1.0, 4.0, 8192), 1.0, pos, 2, 4)),
            "llama3: base 500000, factor 8, low_freq_factor 1, high_freq_factor 4, original context 8192");
  const auto yarn = tf::rope_yarn(1e6, 128, 4.0, 32768);
  EXPECT_EQ(schedule_of(textbook_input(yarn.inv_freq, yarn.attention_factor, pos, 2, 5)),
            "yarn: base 1000000, factor 4, original context 32768, beta_fast 32, beta_slow 1");
}

TEST(DetectIdentify, AttentionFactorAndOffsetWithoutPositions) {
  // Positions 100..147 given as "consecutive from an unknown start": detect finds the start.
  std::vector<std::int64_t> pos;
  for (std::int64_t t = 0; t < 48; ++t) pos.push_back(100 + t);
  auto in = textbook_input(tf::rope_default(10000.0, 64), 1.138629436111989, pos, 3, 6);
  in.positions.reset();
  const detect::detection d = detect::detect(in);
  ASSERT_TRUE(d.found) << d.reason;
  EXPECT_EQ(d.offset, 100);
  EXPECT_NEAR(d.attention_factor, 1.138629436111989, 1e-6);
  EXPECT_EQ(d.layout, detect::layout_found::half_split);
  EXPECT_EQ(d.precision, detect::precision_found::exact);
}

TEST(DetectIdentify, BfloatSixteenCosSinTableIsWorseThanFloat32Angles) {
  // An engine that keeps its cos/sin cache in bfloat16 (rope-scaling.md: up to 24% relative error
  // reported): float32 output, but each cos and sin rounded to 8 significant bits.
  const auto pos = spread_positions(0, 48);
  auto in = textbook_input(tf::rope_default(10000.0, 64), 1.0, pos, 2, 7);
  const auto bf16 = [](double v) {
    int e;
    const double m = std::frexp(v, &e);
    return std::ldexp(std::nearbyint(m * 256) / 256, e);
  };
  const std::int64_t d = 64;
  for (std::size_t t = 0; t < pos.size(); ++t)
    for (std::int64_t h = 0; h < 2; ++h)
      for (int i = 0; i < d / 2; ++i) {
        const std::size_t a = (t * 2 + h) * d + i, b = a + d / 2;
        const double ang = static_cast<double>(pos[t]) * tf::rope_default(10000.0, 64)[i];
        const double c = bf16(std::cos(ang)), s = bf16(std::sin(ang)), x = in.before.values[a], y = in.before.values[b];
        in.after.values[a] = static_cast<float>(x * c - y * s);
        in.after.values[b] = static_cast<float>(y * c + x * s);
      }
  const detect::detection found = detect::detect(in);
  ASSERT_TRUE(found.found) << found.reason;
  EXPECT_EQ(found.precision, detect::precision_found::worse) << detect::report_text(found);
  EXPECT_GT(found.phase_residual, 1e-3) << detect::report_text(found);
}

detect::tensor3 random_tensor(std::mt19937_64& rng, std::int64_t t, std::int64_t h, std::int64_t d) {
  std::normal_distribution<double> n(0, 1);
  detect::tensor3 x{t, h, d, {}};
  for (std::int64_t i = 0; i < t * h * d; ++i) x.values.push_back(static_cast<float>(n(rng)));
  return x;
}

RC_GTEST_PROP(DetectIdentify, NoiseAndUnrelatedArraysHaveNoRotaryStructure, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const std::int64_t tokens = *rc::gen::inRange<std::int64_t>(16, 64), heads = *rc::gen::inRange<std::int64_t>(1, 4),
                     dim = 2 * *rc::gen::inRange<std::int64_t>(1, 33);
  detect::detect_input in;
  in.before = random_tensor(rng, tokens, heads, dim);
  const int kind = *rc::gen::inRange(0, 4);
  if (kind == 0) {
    in.after = random_tensor(rng, tokens, heads, dim);  // noise
  } else if (kind == 1) {
    in.after = in.before;  // unchanged
  } else if (kind == 2) {
    in.after = in.before;  // a scaled copy: nothing turns
    for (auto& v : in.after.values) v *= 2;
  } else {
    // Each token's planes turned by unrelated random angles: rotations, but not by (p + k)·θ.
    in.after = in.before;
    std::uniform_real_distribution<double> a(-3.14, 3.14);
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t i = 0; i < dim / 2; ++i) {
        const double ang = a(rng);
        for (std::int64_t h = 0; h < heads; ++h) {
          const std::size_t p = static_cast<std::size_t>((t * heads + h) * dim + 2 * i);
          const double x = in.before.values[p], y = in.before.values[p + 1];
          in.after.values[p] = x * std::cos(ang) - y * std::sin(ang);
          in.after.values[p + 1] = y * std::cos(ang) + x * std::sin(ang);
        }
      }
  }
  const detect::detection d = detect::detect(in);
  RC_LOG() << "kind " << kind << " [" << tokens << ", " << heads << ", " << dim << "]\n" << detect::report_text(d);
  RC_ASSERT(!d.found);
  RC_ASSERT(d.reason.rfind("no rotary structure found: ", 0) == 0);
}

}  // namespace
