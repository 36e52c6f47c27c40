// grape apply, run as a process on small inputs written here; the output is compared with a
// float64 rotation computed in the test from the formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "../model/formulas.hpp"
#include "cli_util.hpp"

namespace {

using namespace grape::cli_test;
namespace tf = grape::test_formulas;

constexpr int tokens = 5, heads = 2, head_dim = 8;
const std::vector<std::int64_t> positions = {0, 3, 7, 100, 12345};

std::vector<float> input() {
  std::vector<float> x(tokens * heads * head_dim);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * i + 0.1) * 1.5);
  return x;
}

// out = af·R(pos·θ) x on the planes of the layout; channels past rotary_dim copied.
std::vector<double> reference(const std::vector<float>& x, const std::vector<double>& theta, int rotary_dim,
                              bool interleaved, double af) {
  std::vector<double> y(x.begin(), x.end());
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h) {
      const std::size_t row = (static_cast<std::size_t>(t) * heads + h) * head_dim;
      for (int i = 0; i < rotary_dim / 2; ++i) {
        const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + rotary_dim / 2;
        const double ang = static_cast<double>(positions[t]) * theta[i];
        const double c = af * std::cos(ang), s = af * std::sin(ang);
        y[row + a] = x[row + a] * c - x[row + b] * s;
        y[row + b] = x[row + b] * c + x[row + a] * s;
      }
    }
  return y;
}

void write_inputs(const scratch& s, bool int32_positions) {
  const auto x = input();
  write_npy(s / "x.npy", "<f4", {tokens, heads, head_dim}, x.data(), x.size() * 4);
  if (int32_positions) {
    std::vector<std::int32_t> p(positions.begin(), positions.end());
    write_npy(s / "p.npy", "<i4", {tokens}, p.data(), p.size() * 4);
  } else {
    write_npy(s / "p.npy", "<i8", {tokens}, positions.data(), positions.size() * 8);
  }
}

std::string apply_args(const scratch& s, const std::string& config) {
  return "apply --config " + q(s / config) + " --input " + q(s / "x.npy") + " --positions " +
         q(s / "p.npy") + " --output " + q(s / "y.npy") + " --precision float64";
}

std::vector<float> output_f32(const scratch& s) {
  const auto [header, data] = read_npy(s / "y.npy");
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("(5, 2, 8)"), std::string::npos) << header;
  std::vector<float> y(data.size() / 4);
  std::memcpy(y.data(), data.data(), y.size() * 4);
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Apply, PartialHalfSplitLinearMatchesFloat64) {
  const scratch s;
  write_text(s / "c.json", R"({"hidden_size": 32, "num_attention_heads": 4, "partial_rotary_factor": 0.5,
      "max_position_embeddings": 4096, "rope_theta": 10000.0, "rope_scaling": {"type": "linear", "factor": 2.0}})");
  write_inputs(s, true);
  const auto r = run_grape(apply_args(s, "c.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto y = output_f32(s);
  const auto want = reference(input(), tf::rope_linear(10000.0, 4, 2.0), 4, false, 1.0);
  expect_close(y, want, 2e-5);
  // Channels past rotary_dim pass through bit for bit.
  const auto x = input();
  for (int row = 0; row < tokens * heads; ++row)
    for (int c = 4; c < 8; ++c) EXPECT_EQ(y[row * 8 + c], x[row * 8 + c]);
}

TEST(Apply, InterleavedGptJStyleMatchesFloat64) {
  const scratch s;
  write_text(s / "c.json", R"({"model_type": "gptj", "n_embd": 32, "n_head": 4, "rotary_dim": 6, "n_positions": 2048})");
  write_inputs(s, false);
  const auto r = run_grape(apply_args(s, "c.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_close(output_f32(s), reference(input(), tf::rope_default(10000.0, 6), 6, true, 1.0), 2e-5);
}

TEST(Apply, YarnAttentionFactorScalesCosAndSin) {
  const scratch s;
  write_text(s / "c.json", R"({"hidden_size": 32, "num_attention_heads": 4, "max_position_embeddings": 8192,
      "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}})");
  write_inputs(s, false);
  const auto r = run_grape(apply_args(s, "c.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto want = tf::rope_yarn(10000.0, 8, 4.0, 2048);
  expect_close(output_f32(s), reference(input(), want.inv_freq, 8, false, want.attention_factor), 3e-5);
}

TEST(Apply, Float16InputGivesFloat16Output) {
  const scratch s;
  write_text(s / "c.json", R"({"hidden_size": 32, "num_attention_heads": 4, "max_position_embeddings": 4096})");
  const auto x = input();
  std::vector<std::uint16_t> h(x.size());
  std::vector<float> xr(x.size());  // the values the half input really holds
  for (std::size_t i = 0; i < x.size(); ++i) {
    h[i] = float_to_half(x[i]);
    xr[i] = half_to_float(h[i]);
  }
  write_npy(s / "x.npy", "<f2", {tokens, heads, head_dim}, h.data(), h.size() * 2);
  write_npy(s / "p.npy", "<i8", {tokens}, positions.data(), positions.size() * 8);
  const auto r = run_grape(apply_args(s, "c.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto [header, data] = read_npy(s / "y.npy");
  EXPECT_NE(header.find("'<f2'"), std::string::npos);
  ASSERT_EQ(data.size(), h.size() * 2);
  std::vector<float> y(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    std::uint16_t v;
    std::memcpy(&v, data.data() + 2 * i, 2);
    y[i] = half_to_float(v);
  }
  expect_close(y, reference(xr, tf::rope_default(10000.0, 8), 8, false, 1.0), 3e-3);
}

TEST(Apply, Float64InputIsRotatedInFloat32) {
  // NumPy's default dtype: the values before rounding to float32, which input() holds.
  const scratch s;
  write_text(s / "c.json", R"({"hidden_size": 32, "num_attention_heads": 4, "max_position_embeddings": 4096})");
  write_inputs(s, false);
  ASSERT_EQ(run_grape(apply_args(s, "c.json")).code, 0);
  const auto from_float32 = output_f32(s);
  std::vector<double> x(tokens * heads * head_dim);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * i + 0.1) * 1.5;
  ASSERT_NE(static_cast<double>(static_cast<float>(x[1])), x[1]);  // the rounding is real
  write_npy(s / "x.npy", "<f8", {tokens, heads, head_dim}, x.data(), x.size() * 8);
  const auto r = run_grape(apply_args(s, "c.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("float64 input rotated in float32"), std::string::npos) << r.err;
  const auto y = output_f32(s);  // a float32 file, the same shape
  EXPECT_EQ(y, from_float32);
  expect_close(y, reference(input(), tf::rope_default(10000.0, 8), 8, false, 1.0), 2e-5);
}

TEST(Apply, LongRopeChoosesFactorsByLongestPosition) {
  // head_dim 8: four factors per list. Positions reach 12345 > 2048, so the long list is used
  // unless --seq-len says the sequence is short.
  const scratch s;
  write_text(s / "c.json", R"({"hidden_size": 32, "num_attention_heads": 4, "max_position_embeddings": 65536,
      "original_max_position_embeddings": 2048,
      "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 2.5], "long_factor": [1.0, 4.0, 9.0, 30.0]}})");
  write_inputs(s, false);
  auto r = run_grape(apply_args(s, "c.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  const double af = tf::longrope_attention(65536.0 / 2048, 2048);
  expect_close(output_f32(s), reference(input(), tf::rope_longrope(10000.0, 8, {1.0, 4.0, 9.0, 30.0}), 8, false, af),
               3e-5);
  r = run_grape(apply_args(s, "c.json") + " --seq-len 100");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_close(output_f32(s), reference(input(), tf::rope_longrope(10000.0, 8, {1.0, 1.5, 2.0, 2.5}), 8, false, af),
               3e-5);
}

TEST(Apply, BadInputExitsTwoAndLeavesNoOutput) {
  const scratch s;
  write_text(s / "c.json", R"({"hidden_size": 32, "num_attention_heads": 4, "max_position_embeddings": 4096})");
  write_text(s / "wide.json", R"({"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096})");
  write_text(s / "bloom.json", R"({"model_type": "bloom", "hidden_size": 32, "n_head": 4})");
  write_inputs(s, false);
  const auto before = s.names();
  auto expect_bad = [&](const std::string& args, const std::string& needle) {
    const auto r = run_grape(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("grape: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(s.names(), before) << "files left behind by: " << args;
  };
  expect_bad(apply_args(s, "bloom.json"), "bloom.json");
  expect_bad(apply_args(s, "wide.json"), "x.npy");
  expect_bad(apply_args(s, "missing.json"), "missing.json");
  write_text(s / "x.npy", "\x93NUMPY\x01\x00\xff\x00{'descr'");  // truncated
  expect_bad(apply_args(s, "c.json"), "x.npy");
  write_inputs(s, false);
  const std::vector<std::int64_t> short_positions = {0, 1};
  write_npy(s / "p.npy", "<i8", {2}, short_positions.data(), 16);
  expect_bad(apply_args(s, "c.json"), "p.npy");
  const std::vector<float> not_ints(5, 1.0f);
  write_npy(s / "p.npy", "<f4", {5}, not_ints.data(), 20);
  expect_bad(apply_args(s, "c.json"), "p.npy");
  // An output in a directory that does not exist: nothing written anywhere.
  write_inputs(s, false);
  const auto r = run_grape("apply --config " + q(s / "c.json") + " --input " + q(s / "x.npy") + " --positions " +
                       q(s / "p.npy") + " --output " + q(s / "nodir/y.npy"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(s.names(), before);
}

}  // namespace
