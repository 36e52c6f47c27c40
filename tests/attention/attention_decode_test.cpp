// cpu::attention_decode against a float64 dense reference from the instance's own score: random
// paged caches (NHD or HND pages, blocks in shuffled order, block sizes that do and do not divide
// the sequence), K encoded at its positions as rotate_qk writes it, one query per sequence at the
// last position or at one given, windows, GQA, f32/bf16 storage; then bad arguments.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "../kernel_laws/random_call.hpp"
#include "cpu/attention_decode.hpp"
#include "decode_case.hpp"
#include "grape/check/attention_case.hpp"
#include "grape/builtins.hpp"
#include "plain_attention.hpp"

namespace grape {
namespace {

using decode_test::decode_case;

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 2e-5 : 3e-2;
}

template <class E, class T = float>
void matches_reference(std::uint64_t seed, bool given_positions, std::int64_t max_len = 200) {
  std::mt19937_64 rng(seed);
  auto c = decode_test::random_case<E, T>(rng, max_len, given_positions);
  cpu::attention_decode(c.inst, c.args);
  RC_LOG() << "batch " << c.batch << " heads " << c.heads << "/" << c.kv_heads << " block " << c.block_size
           << (c.hnd ? " HND" : " NHD") << " window " << c.args.window << " error " << c.error() << "\n";
  RC_ASSERT(c.error() <= tolerance<T>());
}

TEST(AttentionDecode, MatchesTheDenseReference) {
  property("plain", 81, 10, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    decode_case<plain, float> c(rng, plain{{32}}, 0, 200, s % 2 == 1);
    cpu::attention_decode(cpu::no_encoding{32}, c.args);
    RC_ASSERT(c.error() <= 2e-5);
  });
  property("rope", 82, 12, [](std::uint64_t s) { matches_reference<rope>(s, s % 2 == 1); });
  property("rope bf16", 83, 6, [](std::uint64_t s) { matches_reference<rope, Eigen::bfloat16>(s, false); });
  property("alibi", 84, 10, [](std::uint64_t s) { matches_reference<alibi>(s, s % 2 == 1); });
  property("t5", 85, 8, [](std::uint64_t s) { matches_reference<t5_buckets>(s, false); });
  property("fox", 86, 8, [](std::uint64_t s) { matches_reference<fox>(s, false); });
  property("rope_alibi", 87, 8, [](std::uint64_t s) { matches_reference<rope_alibi>(s, true); });
  property("grape_m", 88, 6, [](std::uint64_t s) { matches_reference<grape_m>(s, false); });
  property("grape_m_contextual", 80, 8, [](std::uint64_t s) { matches_reference<grape_m_contextual>(s, s % 2 == 1); });
  property("grape_ap_relative", 79, 6, [](std::uint64_t s) { matches_reference<grape_ap_relative>(s, s % 2 == 1); });
  // Past 1024 cached tokens a sequence is split over work items whose softmaxes merge by lse.
  property("rope, long", 89, 6, [](std::uint64_t s) { matches_reference<rope>(s, s % 2 == 1, 3500); });
  property("alibi, long", 90, 4, [](std::uint64_t s) { matches_reference<alibi>(s, false, 3500); });
}

TEST(AttentionDecode, BadArgumentsThrowBeforeAnyWrite) {
  std::mt19937_64 rng(9);
  const auto inst = rope::make(rope::default_params());
  decode_case<rope::instance, float> c(rng, inst, 4, 50, false);
  const auto expect_error = [&](cpu::decode_args a, const char* what) {
    try {
      cpu::attention_decode(inst, a);
      ADD_FAILURE() << "no error for " << what;
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_TRUE(std::all_of(c.out.begin(), c.out.end(), [](float x) { return x == 7.0f; }));
  };
  auto a = c.args;
  a.kv_heads = 3;
  expect_error(a, "must be a positive multiple of kv_heads (3)");
  a = c.args;
  a.k.size -= 1;
  expect_error(a, "k: the strides address");
  std::vector<std::int64_t> lens = c.lens;
  lens[0] = c.max_blocks * c.block_size + 1;
  a = c.args;
  a.seq_lens = lens.data();
  expect_error(a, "seq_lens[0]");
  std::vector<std::int32_t> table = c.table;
  table[0] = static_cast<std::int32_t>(c.blocks);
  a = c.args;
  a.block_table = table.data();
  expect_error(a, "block_table[0][0]");
  a = c.args;
  a.max_position = c.lens[0] - 1;
  expect_error(a, "q_positions[0]");
}

}  // namespace
}  // namespace grape
