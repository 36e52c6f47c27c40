// cuda::attention(device_attention(instance), args) on the host: the steps attention.cuh takes —
// the rotation into scratch with the inputs' strides (the device rotation is the CPU kernel's, by
// encode_qk_emulation_test), the bias positions (position_source, the device kernel's body), the
// flash operands of the CPU call (attention_operands), the instance's score functor
// (instance_scores, arrays in host memory) and the flash program over its grid — against the
// float64 dense reference of the instance's own score (check/attention_call.hpp), for built-in
// rotations, biases and compositions and for the tutorial's encodings: a representation of its
// own (quaternion blocks, hour-of-day planes) and a score bias of its own (log distance, through
// its score view). Random calls: padded or packed, GQA, causal or not, windows, ids or offsets.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <random>

#include "../kernel_laws/random_call.hpp"
#include "cpu/attention_backward.hpp"
#include "cuda/instance_attention.hpp"
#include "cuda/instance_scores.hpp"
#include "flash_case.hpp"
#include "grape/builtins.hpp"
#include "grape/check/attention_call.hpp"
#include "hour_of_day_rope.hpp"
#include "log_distance.hpp"
#include "quaternion_rope.hpp"

namespace grape {
namespace {

/// The host steps of cuda::attention on a CPU attention call; the output lands in c.out.
template <class I, class T>
void emulate_cuda_attention(attention_call<I, T>& c) {
  cpu::attention_args a = c.args;
  if (a.qk.cu_seqlens) a.qk.seq_len = *std::max_element(c.len.begin(), c.len.end());  // the longest sequence
  const void* q = a.qk.q.in;
  const void* k = a.qk.k.in;
  std::vector<T> q_rot(static_cast<std::size_t>(a.qk.q.size)), k_rot(static_cast<std::size_t>(a.qk.k.size));
  if constexpr (requires { rotation_part(c.inst).rep; }) {
    cpu::rotate_qk(rotation_part(c.inst), cuda::rotation_into(a.qk, q_rot.data(), k_rot.data()));
    q = q_rot.data();
    k = k_rot.data();
  }
  cuda::host_placement place;
  const auto scores = cuda::instance_scores(c.inst, place);
  std::vector<std::int64_t> positions;
  if (!decltype(scores)::none && cuda::has_bias_positions(a.qk)) {
    const cuda::position_source source = cuda::position_source_of(a.qk);
    for (std::int64_t t = 0; t < c.total; ++t) positions.push_back(source.at(t));
  }
  int error = 0;
  const cuda::flash_operands ops = cuda::attention_operands(a, q, k, positions.empty() ? nullptr : positions.data(),
                                                            c.inst.content_dim(), c.total, &error);
  const cuda::flash_plan plan = cuda::plan_flash(ops, 100 * 1024);
  RC_ASSERT(plan.rows > 0);
  flash_test::emulate<T>(ops, plan, scores);
  RC_ASSERT(error == 0);
}

/// The host steps of cuda::attention_backward after cpu::attention's forward (its out and lse):
/// the rotation again, the flash backward into the rotated operands' gradients, the rotation's
/// transpose; against cpu::attention_backward, the largest difference over the largest gradient.
template <class I>
double backward_difference(attention_call<I, float>& c, std::mt19937_64& rng) {
  cpu::attention(c.inst, c.args);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> dout(c.out.size());
  for (auto& x : dout) x = g(rng);
  std::vector<float> want_dq(c.q.size()), want_dk(c.k.size()), want_dv(c.v.size());
  cpu::attention_backward(c.inst, c.args, {dout.data(), want_dq.data(), want_dk.data(), want_dv.data()});

  cpu::attention_args a = c.args;
  if (a.qk.cu_seqlens) a.qk.seq_len = *std::max_element(c.len.begin(), c.len.end());
  std::vector<float> q_rot(c.q.size()), k_rot(c.k.size()), dq_rot(c.q.size()), dk_rot(c.k.size());
  std::vector<float> dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  constexpr bool rotates = requires { rotation_part(c.inst).rep; };
  if constexpr (rotates) cpu::rotate_qk(rotation_part(c.inst), cuda::rotation_into(a.qk, q_rot.data(), k_rot.data()));
  cuda::host_placement place;
  const auto scores = cuda::instance_scores(c.inst, place);
  std::vector<std::int64_t> positions;
  if (!decltype(scores)::none && cuda::has_bias_positions(a.qk))
    for (std::int64_t t = 0; t < c.total; ++t) positions.push_back(cuda::position_source_of(a.qk).at(t));
  int error = 0;
  const cuda::flash_operands ops =
      cuda::attention_operands(a, rotates ? q_rot.data() : a.qk.q.in, rotates ? k_rot.data() : a.qk.k.in,
                               positions.empty() ? nullptr : positions.data(), c.d, c.total, &error);
  const cuda::flash_grads fg{dout.data(), rotates ? dq_rot.data() : dq.data(), rotates ? dk_rot.data() : dk.data(),
                             dv.data()};
  const cuda::flash_plan plan = cuda::plan_flash_backward(ops, 150 * 1024);
  flash_test::emulate_backward<float>(ops, fg, plan, scores);
  if constexpr (rotates)
    cpu::rotate_qk_backward(rotation_part(c.inst),
                            cuda::rotation_back(a.qk, dq_rot.data(), dk_rot.data(), dq.data(), dk.data(), c.total, c.d));
  RC_ASSERT(error == 0);
  double worst = 0;
  for (const auto& [got, want] : {std::pair{&dq, &want_dq}, {&dk, &want_dk}, {&dv, &want_dv}}) {
    double diff = 0, scale = 1e-30;
    for (std::size_t e = 0; e < got->size(); ++e) {
      diff = std::max(diff, static_cast<double>(std::abs((*got)[e] - (*want)[e])));
      scale = std::max(scale, static_cast<double>(std::abs((*want)[e])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

/// A random instance of E whose head_dim the flash tiles take (a multiple of 16).
template <class E>
typename E::instance instance_of(std::mt19937_64& rng) {
  auto p = E::random_params(rng);
  const auto round_up = [](int d) { return std::max(16, (d + 15) / 16 * 16); };
  if constexpr (requires { p.head_dim; }) p.head_dim = round_up(p.head_dim);
  else if constexpr (requires { p.rotary.head_dim; }) p.rotary.head_dim = round_up(p.rotary.head_dim);
  return E::make(p);
}

template <class E, class T = float>
void matches_reference(std::uint64_t seed, std::int64_t position_base, std::int64_t span = 450) {
  std::mt19937_64 rng(seed);
  const auto inst = instance_of<E>(rng);
  attention_call<typename E::instance, T> c(rng, inst, encoding_heads(inst), 100, position_base, span);
  emulate_cuda_attention(c);
  const attention_comparison r = c.compare();
  RC_LOG() << E::name << ": tokens " << c.total << " heads " << c.heads << "/" << c.kv_heads << " d " << c.d
           << " causal " << c.args.causal << " window " << c.args.window << " error " << r.worst << " bound "
           << r.bound << "\n";
  RC_ASSERT(r.worst <= flash_test::tolerance<T>());
}

TEST(AttentionInstanceEmulation, RotationsMatchTheDenseReference) {
  property("rope f32", 71, 10, [](std::uint64_t s) { matches_reference<rope>(s, 1000); });
  property("rope f16", 72, 5, [](std::uint64_t s) { matches_reference<rope, Eigen::half>(s, 1000); });
  property("rope bf16", 73, 5, [](std::uint64_t s) { matches_reference<rope, Eigen::bfloat16>(s, 1000); });
  property("xpos", 74, 5, [](std::uint64_t s) { matches_reference<xpos>(s, 0, 200); });
}

TEST(AttentionInstanceEmulation, ScoreBiasesAndCompositionsMatchTheDenseReference) {
  property("alibi", 75, 10, [](std::uint64_t s) { matches_reference<alibi>(s, 100000); });
  property("alibi bf16", 76, 5, [](std::uint64_t s) { matches_reference<alibi, Eigen::bfloat16>(s, 100000); });
  property("t5", 77, 10, [](std::uint64_t s) { matches_reference<t5_buckets>(s, 0); });
  property("fox", 78, 10, [](std::uint64_t s) { matches_reference<fox>(s, 0); });
  property("grape_a_key_gated", 79, 10, [](std::uint64_t s) { matches_reference<grape_a_key_gated>(s, 0); });
  property("grape_a_qk_gated", 80, 10, [](std::uint64_t s) { matches_reference<grape_a_qk_gated>(s, 0); });
  property("rope_alibi", 81, 10, [](std::uint64_t s) { matches_reference<rope_alibi>(s, 5000); });
}

TEST(AttentionInstanceEmulation, TheTutorialsEncodingsNeedNoNewCode) {
  property("log_distance", 82, 10, [](std::uint64_t s) { matches_reference<log_distance>(s, 0); });
  property("quaternion_rope", 83, 10, [](std::uint64_t s) { matches_reference<quaternion_rope<>>(s, 1000); });
  property("hour_of_day_rope", 84, 10, [](std::uint64_t s) { matches_reference<hour_of_day_rope<true>>(s, 0); });
}

template <class E>
void backward_matches_the_cpu(std::uint64_t seed, std::int64_t position_base) {
  std::mt19937_64 rng(seed);
  const auto inst = instance_of<E>(rng);
  attention_call<typename E::instance, float> c(rng, inst, encoding_heads(inst), 100, position_base, 450);
  const double e = backward_difference(c, rng);
  RC_LOG() << E::name << ": tokens " << c.total << " heads " << c.heads << "/" << c.kv_heads << " d " << c.d
           << " causal " << c.args.causal << " window " << c.args.window << " gradient difference " << e << "\n";
  RC_ASSERT(e < 1e-4);
}

TEST(AttentionInstanceEmulation, BackwardMatchesTheCpuBackward) {
  property("rope", 85, 6, [](std::uint64_t s) { backward_matches_the_cpu<rope>(s, 1000); });
  property("rope_alibi", 86, 6, [](std::uint64_t s) { backward_matches_the_cpu<rope_alibi>(s, 5000); });
  property("fox", 87, 6, [](std::uint64_t s) { backward_matches_the_cpu<fox>(s, 0); });
  property("log_distance", 88, 6, [](std::uint64_t s) { backward_matches_the_cpu<log_distance>(s, 0); });
  property("quaternion_rope", 89, 6, [](std::uint64_t s) { backward_matches_the_cpu<quaternion_rope<>>(s, 1000); });
}

TEST(AttentionInstanceEmulation, PositionsOfPackedAndPaddedCalls) {
  const std::vector<std::int64_t> cu{0, 3, 3, 7}, offsets{100, 200, 300};
  cpu::rotate_qk_args qk;
  qk.batch = 3;
  qk.cu_seqlens = cu.data();
  qk.offsets = offsets.data();
  const cuda::position_source packed = cuda::position_source_of(qk);
  const std::vector<std::int64_t> want{100, 101, 102, 300, 301, 302, 303};
  for (std::int64_t t = 0; t < 7; ++t) EXPECT_EQ(packed.at(t), want[static_cast<std::size_t>(t)]) << t;
  qk.cu_seqlens = nullptr;
  qk.seq_len = 2;
  const cuda::position_source padded = cuda::position_source_of(qk);
  EXPECT_EQ(padded.at(3), 201);
  EXPECT_EQ(padded.at(4), 300);
  const std::vector<std::int32_t> ids{7, 9};
  qk.position_ids = ids.data();
  qk.position_type = cpu::index_type::i32;
  EXPECT_EQ(cuda::position_source_of(qk).at(1), 9);
}

TEST(AttentionInstanceEmulation, BadCallsAreRefusedBeforeAnyLaunch) {
  std::mt19937_64 rng(5);
  const auto inst = instance_of<alibi>(rng);
  attention_call<alibi::instance, float> c(rng, inst, encoding_heads(inst), 40, 0, 100);
  int error = 0;
  cpu::attention_args a = c.args;
  a.qk.batch = 2;
  a.qk.cu_seqlens = nullptr;
  a.qk.seq_len = 4;
  a.qk.q.batch_stride = 3;  // not seq_len·token_stride: the flash call cannot walk it
  EXPECT_THROW(cuda::attention_operands(a, a.qk.q.in, a.qk.k.in, nullptr, c.d, 8, &error), input_error);
  a = c.args;
  a.qk.cu_seqlens = c.cu.data();
  a.qk.seq_len = 0;  // the longest sequence is required with cu_seqlens
  EXPECT_THROW(cuda::attention_operands(a, a.qk.q.in, a.qk.k.in, nullptr, c.d, c.total, &error), input_error);
  a = c.args;
  if (a.qk.cu_seqlens) a.qk.seq_len = *std::max_element(c.len.begin(), c.len.end());
  a.qk.q.size -= 1;  // one element short
  EXPECT_THROW(cuda::attention_operands(a, a.qk.q.in, a.qk.k.in, nullptr, c.d, c.total, &error), input_error);
}

}  // namespace
}  // namespace grape
