// cuda::attention_decode(device_attention(instance), args) on the host: the steps
// attention_decode_cuda.hpp takes — the queries' positions (decode_positions, the device body), the
// queries turned at them as the device turns them (instance_steps.hpp), the instance's score
// functor (arrays in host memory), the decode program over its grid (chunks × sequences × blocks
// of query heads) and the merge — against cpu::attention_decode on the same random paged caches
// (decode_case.hpp: NHD and HND pages, shuffled blocks, block sizes 1 to 32, windows, GQA,
// sequences long enough to split into chunks): RoPE (f32, bf16), ALiBi, T5, FoX, RoPE + ALiBi,
// GRAPE-M (learnable, contextual), GRAPE-AP, and a bad block id or position, which must flag.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../attention/decode_case.hpp"
#include "../kernel_laws/random_call.hpp"
#include "cuda/attention_decode_cuda.hpp"
#include "cuda/host_storage.hpp"
#include "grape/builtins.hpp"
#include "instance_steps.hpp"

namespace grape {
namespace {

using decode_test::decode_case;

/// The host steps of cuda::attention_decode on a decode case; the output lands in c.out and c.lse.
/// The error flag.
template <class I, class T>
int emulate_cuda_decode(decode_case<I, T>& c) {
  const cpu::decode_args& a = c.args;
  int flag = 0;
  const std::int64_t max_len = *std::max_element(c.lens.begin(), c.lens.end());
  const cuda::decode_shape s = cuda::detail::decode_shape_of(a, c.d, c.d, max_len, &flag);
  std::vector<std::int64_t> q_pos(static_cast<std::size_t>(a.batch), -1);
  const cuda::decode_positions positions{s, a.q_positions, a.max_position, q_pos.data()};
  for (std::int64_t b = 0; b < a.batch; ++b) positions(b);
  std::vector<T> q_rot(c.q.size());
  const void* q = a.q;
  if constexpr (emulation::rotates<I>) {
    emulation::rotate_as_the_device(c.inst, cuda::detail::decode_queries(a, c.d, q_pos.data()), a.batch,
                                    q_rot.data(), static_cast<T*>(nullptr));
    q = q_rot.data();
  }
  cuda::host_placement place;
  const auto scores = cuda::instance_scores(c.inst, place);
  std::vector<float> parts(static_cast<std::size_t>(cuda::decode_part_floats(s)), std::nanf(""));
  const cuda::decode_call call =
      cuda::detail::decode_call_of(a, s, q, q_pos.data(), parts.data(), 1.0f / std::sqrt(static_cast<float>(c.d)));
  const auto program = cuda::decode_program_of<T>(call, scores);
  std::vector<double> smem(static_cast<std::size_t>(cuda::decode_smem_of(sizeof(T), s.heads_per_block, c.d, c.d).bytes) / 8 + 1);
  for (std::int64_t z = 0; z < cuda::decode_head_blocks(s); ++z)
    for (std::int64_t b = 0; b < a.batch; ++b)
      for (std::int64_t x = 0; x < s.chunks; ++x)
        program.run(x, b, z, cuda::block_shape{cuda::decode_threads}, reinterpret_cast<unsigned char*>(smem.data()));
  const auto merge = cuda::decode_merge_of<T>(call);
  for (std::int64_t item = 0; item < a.batch * a.q_heads; ++item) merge(item);
  return flag;
}

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 2e-2;  // bf16: the output rounded once on either side
}

template <class E, class T = float>
void matches_the_cpu(std::uint64_t seed, bool given_positions, std::int64_t max_len = 200) {
  std::mt19937_64 rng(seed);
  auto c = decode_test::random_case<E, T>(rng, max_len, given_positions);
  cpu::attention_decode(c.inst, c.args);
  const std::vector<T> want = c.out;
  const std::vector<float> want_lse = c.lse;
  std::fill(c.out.begin(), c.out.end(), T(7.0f));
  std::fill(c.lse.begin(), c.lse.end(), 0.0f);
  RC_ASSERT(emulate_cuda_decode(c) == 0);
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(c.out[i])) - static_cast<float>(want[i])));
  for (std::size_t i = 0; i < want_lse.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(c.lse[i]) - want_lse[i]) / 8);
  RC_LOG() << E::name << ": batch " << c.batch << " heads " << c.heads << "/" << c.kv_heads << " block "
           << c.block_size << (c.hnd ? " HND" : " NHD") << " window " << c.args.window << " difference " << worst
           << "\n";
  RC_ASSERT(worst <= tolerance<T>());
}

TEST(DecodeEmulation, MatchesTheCpuDecode) {
  property("rope", 101, 10, [](std::uint64_t s) { matches_the_cpu<rope>(s, s % 2 == 1); });
  property("rope bf16", 102, 5, [](std::uint64_t s) { matches_the_cpu<rope, Eigen::bfloat16>(s, false); });
  property("alibi", 103, 8, [](std::uint64_t s) { matches_the_cpu<alibi>(s, s % 2 == 1); });
  property("t5", 104, 6, [](std::uint64_t s) { matches_the_cpu<t5_buckets>(s, false); });
  property("fox", 105, 6, [](std::uint64_t s) { matches_the_cpu<fox>(s, false); });
  property("rope_alibi", 106, 6, [](std::uint64_t s) { matches_the_cpu<rope_alibi>(s, true); });
  property("grape_m", 107, 5, [](std::uint64_t s) { matches_the_cpu<grape_m>(s, false); });
  property("grape_m_contextual", 108, 6, [](std::uint64_t s) { matches_the_cpu<grape_m_contextual>(s, s % 2 == 1); });
  property("grape_ap_relative", 109, 6, [](std::uint64_t s) { matches_the_cpu<grape_ap_relative>(s, s % 2 == 1); });
  // Past 1024 cached tokens a sequence is split into chunks whose softmaxes merge by lse.
  property("rope, long", 110, 3, [](std::uint64_t s) { matches_the_cpu<rope>(s, s % 2 == 1, 3000); });
}

TEST(DecodeEmulation, ABadBlockIdOrPositionFlags) {
  std::mt19937_64 rng(4);
  const auto inst = rope::make(rope::default_params());
  decode_case<rope::instance, float> c(rng, inst, 4, 40, false);
  c.table[0] = static_cast<std::int32_t>(c.blocks);  // one past the pool
  EXPECT_EQ(emulate_cuda_decode(c), 1);
  // A query position below 0 (ALiBi: on the host, a rotation's CPU stand-in would throw where the
  // device's rotation flags).
  const auto bias = alibi::make(alibi::default_params());
  decode_case<alibi::instance, float> d(rng, bias, bias.heads(), 40, true);
  d.q_pos[0] = -1;
  EXPECT_EQ(emulate_cuda_decode(d), 1);
}

}  // namespace
}  // namespace grape
