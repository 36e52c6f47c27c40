// cpu::attention against a float64 dense reference built from the encoding's own score
// (instance.score: the encoded q·k plus the bias, one pair at a time), softmax materialized:
// every injection kind, padded and varlen batches crossing the 64-token tiles, causal and not,
// sliding windows, GQA, ids and offsets, f32/f16/bf16; shift invariance of the output for the
// relative encodings; bad arguments.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../kernel_laws/random_call.hpp"
#include "matmul_paths.hpp"
#include "plain_attention.hpp"
#include "cpu/attention.hpp"
#include "grape/check/attention_case.hpp"
#include "grape/builtins.hpp"

namespace grape {
namespace {

template <class T>
double output_tolerance() {
  if constexpr (std::is_same_v<T, float>) return 2e-5;
  else if constexpr (std::is_same_v<T, Eigen::half>) return 4e-3;
  else return 3e-2;
}

template <class E, class T>
void matches_reference(std::uint64_t seed, std::int64_t position_base, std::int64_t max_len = 150) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  attention_case<typename E::instance, T> c(rng, inst, encoding_heads(inst), max_len, position_base, 3 * max_len);
  cpu::attention(c.inst, c.args);
  const attention_comparison r = c.compare();
  RC_LOG() << "tokens " << c.total << " heads " << c.heads << "/" << c.kv_heads << " causal " << c.args.causal
           << " window " << c.args.window << " error " << r.worst << " bound " << r.bound << "\n";
  RC_ASSERT(r.worst <= output_tolerance<T>());
  RC_ASSERT(r.worst <= r.bound);  // the checker's attention_kernel tolerance holds where the fixed one does
}

TEST(Attention, NoEncodingMatchesTheDenseReference) {
  property("plain", 41, 20, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    attention_case<plain, float> c(rng, plain{{std::array{16, 64, 24}[s % 3]}}, 0, 150, 0, 450);
    cpu::attention(cpu::no_encoding{c.d}, c.args);
    RC_ASSERT(c.compare().worst <= output_tolerance<float>());
  });
}

TEST(Attention, RopeMatchesTheDenseReferenceInEveryDtype) {
  property("f32", 42, 15, [](std::uint64_t s) { matches_reference<rope, float>(s, 1000); });
  property("f16", 43, 8, [](std::uint64_t s) { matches_reference<rope, Eigen::half>(s, 1000); });
  property("bf16", 44, 8, [](std::uint64_t s) { matches_reference<rope, Eigen::bfloat16>(s, 1000); });
}

TEST(Attention, ScoreBiasesMatchTheDenseReference) {
  property("alibi", 45, 15, [](std::uint64_t s) { matches_reference<alibi, float>(s, 100000); });
  property("t5", 46, 15, [](std::uint64_t s) { matches_reference<t5_buckets, float>(s, 0); });
}

TEST(Attention, LiftsAndCompositionsMatchTheDenseReference) {
  property("grape_a", 47, 15, [](std::uint64_t s) { matches_reference<grape_a, float>(s, 200); });
  property("rope_alibi", 48, 15, [](std::uint64_t s) { matches_reference<rope_alibi, float>(s, 5000); });
  property("grape_m", 49, 10, [](std::uint64_t s) { matches_reference<grape_m, float>(s, 300); });
  property("grape_m_contextual", 56, 10, [](std::uint64_t s) { matches_reference<grape_m_contextual, float>(s, 0); });
  property("grape_m_contextual bf16", 57, 5,
           [](std::uint64_t s) { matches_reference<grape_m_contextual, Eigen::bfloat16>(s, 0); });
}

/// Sequences of up to 700 tokens: several 256-query blocks and 128-key tiles, so the key tiles
/// meet query blocks that start past them, and a mask's first seeing row falls inside a block.
TEST(Attention, LongSequencesCrossTheQueryBlocks) {
  property("rope", 58, 4, [](std::uint64_t s) { matches_reference<rope, float>(s, 1000, 700); });
  property("alibi", 59, 4, [](std::uint64_t s) { matches_reference<alibi, float>(s, 0, 700); });
}

/// bf16 storage on every matrix-instruction path this CPU has (cpu/matmul_path.hpp): on
/// avx512_bf16 the encoded Q' and K' and the probabilities are rounded to bf16 before the
/// products, and the output must stay within bf16 storage's fixed tolerance and the bound the
/// reference derives for that rounding (attention_case::compare); sequences up to 700 tokens cross
/// the 256-query blocks and 128-key tiles.
TEST(Attention, Bf16MatchesTheDenseReferenceOnEveryMatmulPath) {
  using bf = Eigen::bfloat16;
  for (const cpu::matmul_path path : available_matmul_paths()) {
    SCOPED_TRACE(cpu::matmul_path_name(path));
    const forced_matmul_path forced(path);
    property("plain", 60, 8, [](std::uint64_t s) {
      std::mt19937_64 rng(s);
      attention_case<plain, bf> c(rng, plain{{std::array{16, 64, 24, 7}[s % 4]}}, 0, 300, 0, 900);
      cpu::attention(cpu::no_encoding{c.d}, c.args);
      const attention_comparison r = c.compare();
      RC_ASSERT(r.worst <= output_tolerance<bf>());
      RC_ASSERT(r.worst <= r.bound);
    });
    property("rope", 61, 8, [](std::uint64_t s) { matches_reference<rope, bf>(s, 1000, 700); });
    property("alibi", 62, 6, [](std::uint64_t s) { matches_reference<alibi, bf>(s, 100000); });
    property("t5", 63, 6, [](std::uint64_t s) { matches_reference<t5_buckets, bf>(s, 0); });
    property("grape_a", 64, 6, [](std::uint64_t s) { matches_reference<grape_a, bf>(s, 200); });
    property("rope_alibi", 65, 6, [](std::uint64_t s) { matches_reference<rope_alibi, bf>(s, 5000); });
    property("grape_m_contextual", 66, 5, [](std::uint64_t s) { matches_reference<grape_m_contextual, bf>(s, 0); });
  }
}

/// The switch takes effect: on avx512_bf16 the same bf16 call gives another output than on f32
/// (the rounding of Q', K' and P), and both agree within bf16's tolerance; f32 and f16 storage
/// give the same output bit for bit whatever is asked (they never take the bf16 tiles).
TEST(Attention, TheMatmulSwitchChangesOnlyBf16Calls) {
  if (available_matmul_paths().size() < 2) GTEST_SKIP() << "one matmul path on this CPU";
  const auto run = [](auto tag, cpu::matmul_path path) {
    using T = decltype(tag);
    const forced_matmul_path forced(path);
    std::mt19937_64 rng(9);
    const auto inst = rope::make(rope::random_params(rng));
    attention_case<rope::instance, T> c(rng, inst, 0, 300, 0, 900);
    cpu::attention(c.inst, c.args);
    std::vector<double> out(c.out.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(c.out[i]);
    return out;
  };
  const auto f32_path = run(Eigen::bfloat16{}, cpu::matmul_path::f32);
  const auto bf16_path = run(Eigen::bfloat16{}, cpu::matmul_path::avx512_bf16);
  double differ = 0;
  for (std::size_t i = 0; i < f32_path.size(); ++i) differ = std::max(differ, std::abs(f32_path[i] - bf16_path[i]));
  EXPECT_GT(differ, 0.0);
  EXPECT_LE(differ, 2 * output_tolerance<Eigen::bfloat16>());
  EXPECT_EQ(run(float{}, cpu::matmul_path::f32), run(float{}, cpu::matmul_path::avx512_bf16));
  EXPECT_EQ(run(Eigen::half{}, cpu::matmul_path::f32), run(Eigen::half{}, cpu::matmul_path::avx512_bf16));
}

/// Moving every position by t (up to max_shift) leaves the output of a relative encoding
/// unchanged, within tol.
template <class E>
void shift_invariant(std::uint64_t seed, std::int64_t max_shift, float tol) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  attention_case<typename E::instance, float> c(rng, inst, encoding_heads(inst), 100, 10, 300);
  const std::int64_t t = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_shift));
  auto shifted = c.shifted(t);
  cpu::attention(c.inst, c.args);
  cpu::attention(shifted.inst, shifted.args);
  for (std::size_t i = 0; i < c.out.size(); ++i) RC_ASSERT(std::abs(c.out[i] - shifted.out[i]) <= tol);
}

TEST(Attention, RelativeEncodingsAreShiftInvariant) {
  // RoPE: exact phases, so the rotated operands differ by float32 rounding only. ALiBi: the bias
  // is formed from the offset in double, so a shift changes nothing. GRAPE-A: the bias is the
  // difference of two lifted coordinates slope·m and slope·n held in float32, so a shift t costs
  // about eps32·slope·(m + t) in each logit, 1e-4 here (docs/attention.md).
  property("rope", 51, 10, [](std::uint64_t s) { shift_invariant<rope>(s, 1 << 20, 2e-5f); });
  property("alibi", 52, 10, [](std::uint64_t s) { shift_invariant<alibi>(s, 1 << 30, 0.0f); });
  property("grape_a", 53, 10, [](std::uint64_t s) { shift_invariant<grape_a>(s, 1 << 10, 2e-4f); });
}

TEST(Attention, BadArgumentsThrowBeforeAnyWrite) {
  std::mt19937_64 rng(5);
  attention_case<plain, float> c(rng, plain{{8}}, 4, 20, 0, 60);
  const auto expect_error = [&](cpu::attention_args a, const char* what) {
    std::fill(c.out.begin(), c.out.end(), 7.0f);
    try {
      cpu::attention(cpu::no_encoding{8}, a);
      ADD_FAILURE() << "no error for " << what;
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_TRUE(std::all_of(c.out.begin(), c.out.end(), [](float x) { return x == 7.0f; }));
  };
  auto a = c.args;
  a.qk.k.heads = 3;
  expect_error(a, "must be a multiple of k.heads (3)");
  a = c.args;
  a.v.size -= 1;
  expect_error(a, "v: the strides address");
  a = c.args;
  a.out = nullptr;
  expect_error(a, "out must not be null");
  a = c.args;
  a.qk.max_position = 1;
  if (c.total > 1) expect_error(a, "max_position = 1");
}

}  // namespace
}  // namespace grape
