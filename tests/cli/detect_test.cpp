// grape detect as a process: Q rotated by `grape apply` under a config with the wrong layout, then
// detected against the bundled config (docs/detect.md shows this run verbatim); exit codes 0/1/2
// and the one-line messages.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "cli_util.hpp"

namespace {

using namespace grape::cli_test;

constexpr int tokens = 48, heads = 2, head_dim = 128;

// Q before the rotation, [48, 2, 128] float32, and positions 0..47 written to `s`; the docs case.
void write_case(const scratch& s) {
  std::vector<float> q(static_cast<std::size_t>(tokens) * heads * head_dim);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(std::sin(0.61 * i + 0.3) + 0.5 * std::cos(1.7 * i));
  write_npy(s / "q.npy", "<f4", {tokens, heads, head_dim}, q.data(), q.size() * 4);
  std::vector<std::int64_t> p(tokens);
  for (int t = 0; t < tokens; ++t) p[t] = t;
  write_npy(s / "positions.npy", "<i8", {tokens}, p.data(), p.size() * 8);
  std::string config = slurp(config_path("llama-3.1-8b"));
  write_text(s / "config.json", config);
  // The engine under test: Llama 3.1's schedule with GPT-J's interleaved pairing.
  config.insert(config.find('{') + 1, "\n  \"rope_interleave\": true,");
  write_text(s / "engine.json", config);
}

std::string in_dir(const scratch& s, const std::string& args) { return "cd " + q(s.dir) + " && " + args; }

result grape_in(const scratch& s, const std::string& args) {
  return run_shell(in_dir(s, std::string("'") + GRAPE_BINARY_DIR + "/bin/grape' " + args));
}

// Numbers in e-notation (residuals, spreads: rounding-level values that depend on the machine's
// float arithmetic) compared by form only; every other character verbatim.
std::string masked(const std::string& text) {
  const std::string numbers = std::regex_replace(text, std::regex("[0-9.]+e[-+][0-9]+"), "<e-number>");
  // Where a rounding-level phase error peaks depends on how the compiler contracted the float
  // arithmetic (it differs between the -O2 and the sanitizer build).
  return std::regex_replace(numbers, std::regex("(phase error <e-number> rad at position )[0-9]+"), "$1<n>");
}

// The ``` block that follows `anchor` in a doc.
std::string doc_block(const std::string& doc, const std::string& anchor) {
  const auto at = doc.find(anchor);
  if (at == std::string::npos) return "";
  const auto open = doc.find("```\n", at);
  const auto close = doc.find("```\n", open + 4);
  return doc.substr(open + 4, close - open - 4);
}

TEST(Detect, LayoutBugFromApplyIsNamedAndMatchesTheDocs) {
  const scratch s;
  write_case(s);
  const auto applied = grape_in(s, "apply --config engine.json --input q.npy --positions positions.npy --output q_rope.npy");
  ASSERT_EQ(applied.code, 0) << applied.err;
  const auto r = grape_in(s, "detect --input q.npy --output q_rope.npy --positions positions.npy --config config.json");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("layout: interleaved, the config's model is half-split\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compared with config.json: 1 difference\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("llama3: base 500000, factor 8"), std::string::npos) << r.out;
  const auto j = grape_in(s, "detect --input q.npy --output q_rope.npy --positions positions.npy --config config.json --json");
  EXPECT_EQ(j.code, 1) << j.out << j.err;
  EXPECT_NE(j.out.find("\"field\": \"layout\""), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"evidence\": \"the planes found fit with residual"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"layout\": \"interleaved\""), std::string::npos) << j.out;
  const std::string doc = slurp(std::string(GRAPE_SOURCE_DIR) + "/docs/detect.md");
  EXPECT_EQ(masked(doc_block(doc, "<!-- output of the detect run above -->")), masked(r.out)) << "the run printed:\n" << r.out;
}

TEST(Detect, FaithfulOutputExitsZeroAndJsonHasNoDifferences) {
  const scratch s;
  write_case(s);
  ASSERT_EQ(grape_in(s, "apply --config config.json --input q.npy --positions positions.npy --output q_rope.npy").code, 0);
  const auto r = grape_in(s, "detect --input q.npy --output q_rope.npy --positions positions.npy --config config.json");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("compared with config.json: no difference\n"), std::string::npos) << r.out;
  const auto j = grape_in(s, "detect --input q.npy --output q_rope.npy --config config.json --json");
  EXPECT_EQ(j.code, 0) << j.out << j.err;
  EXPECT_NE(j.out.find("\"differences\": []"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"layout\": \"half-split\""), std::string::npos) << j.out;
}

TEST(Detect, UnrelatedArraysAreNoRotaryStructureAndExitOne) {
  const scratch s;
  write_case(s);
  std::vector<float> noise(static_cast<std::size_t>(tokens) * heads * head_dim);
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<float>(std::sin(1e3 * std::sqrt(i + 1.0)));
  write_npy(s / "noise.npy", "<f4", {tokens, heads, head_dim}, noise.data(), noise.size() * 4);
  const auto r = grape_in(s, "detect --input q.npy --output noise.npy");
  EXPECT_EQ(r.code, 0) << r.err;  // nothing to compare with: a report, not a difference
  EXPECT_EQ(r.out.rfind("no rotary structure found: ", 0), 0u) << r.out;
  const auto c = grape_in(s, "detect --input q.npy --output noise.npy --config config.json");
  EXPECT_EQ(c.code, 1) << c.out << c.err;
}

// bfloat16 bits (round to nearest even) as NumPy stores them: uint16.
std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out;
  for (float f : v) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    out.push_back(static_cast<std::uint16_t>(bits >> 16));
  }
  return out;
}

std::vector<float> read_f32(const fs::path& p) {
  const auto [header, data] = read_npy(p);
  std::vector<float> v(data.size() / 4);
  std::memcpy(v.data(), data.data(), v.size() * 4);
  return v;
}

TEST(Detect, BfloatSixteenArraysAsUint16) {
  const scratch s;
  write_case(s);
  // Q in bfloat16: the values apply rotates are the bfloat16 ones, the result is rounded to bfloat16.
  std::vector<float> q = read_f32(s / "q.npy");
  const auto qb = to_bf16(q);
  for (std::size_t i = 0; i < q.size(); ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(qb[i]) << 16;
    std::memcpy(&q[i], &bits, 4);
  }
  write_npy(s / "q.npy", "<f4", {tokens, heads, head_dim}, q.data(), q.size() * 4);
  ASSERT_EQ(grape_in(s, "apply --config engine.json --input q.npy --positions positions.npy --output q_rope.npy").code, 0);
  const auto yb = to_bf16(read_f32(s / "q_rope.npy"));
  write_npy(s / "q_bf16.npy", "<u2", {tokens, heads, head_dim}, qb.data(), qb.size() * 2);
  write_npy(s / "q_rope_bf16.npy", "<u2", {tokens, heads, head_dim}, yb.data(), yb.size() * 2);
  const auto r = grape_in(s, "detect --input q_bf16.npy --output q_rope_bf16.npy --positions positions.npy --config config.json");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("compared with config.json: 1 difference\nlayout: interleaved, the config's model is half-split\n"),
            std::string::npos) << r.out;
}

TEST(Detect, BadInputIsOneLineAndExitTwo) {
  const scratch s;
  write_case(s);
  std::vector<float> small(static_cast<std::size_t>(tokens) * heads * 64);
  write_npy(s / "small.npy", "<f4", {tokens, heads, 64}, small.data(), small.size() * 4);
  std::vector<std::int64_t> p(3);
  write_npy(s / "p3.npy", "<i8", {3}, p.data(), p.size() * 8);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"detect --input missing.npy --output q.npy", "missing.npy"},
      {"detect --input q.npy --output small.npy", "--output: shape [48, 2, 64] differs from --input's [48, 2, 128]"},
      {"detect --input q.npy --output q.npy --positions p3.npy", "p3.npy: positions must have shape [48]"},
      {"detect --input q.npy --output q.npy --positions q.npy", "q.npy: positions must have shape [48]"},
      {"detect --input q.npy --output q.npy --config missing.json", "missing.json"},
      {"detect --input q.npy --output positions.npy", "positions.npy: must have shape [tokens, heads, head_dim]"},
      {"detect --input q.npy --output q.npy --config " + config_path("bloom"), "detect compares rotary encodings only"},
  };
  for (const auto& [args, names] : cases) {
    const auto r = grape_in(s, args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(names), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
  // A missing argument is CLI11's message (with its "Run with --help" line), exit 2 as everywhere.
  const auto r = grape_in(s, "detect --input q.npy");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("--output is required", 0), 0u) << r.err;
}

}  // namespace
