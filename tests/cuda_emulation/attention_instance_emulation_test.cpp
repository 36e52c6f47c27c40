// cuda::attention(device_attention(instance), args) on the host: the steps attention_cuda.hpp takes —
// the rotation into scratch with the inputs' strides (the device rotation is the CPU kernel's, by
// encode_qk_emulation_test), the bias positions (position_source, the device kernel's body), the
// flash operands of the CPU call (attention_operands), the instance's score functor
// (instance_scores, arrays in host memory) and the flash program over its grid — against the
// float64 dense reference of the instance's own score (check/attention_case.hpp), for built-in
// rotations, biases and compositions and for the tutorial's encodings: a representation of its
// own (quaternion blocks, hour-of-day planes) and a score bias of its own (log distance, through
// its score view). Random calls: padded or packed, GQA, causal or not, windows, ids or offsets.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <random>

#include "../kernel_laws/random_call.hpp"
#include "cpu/attention_backward.hpp"
#include "cuda/attention_host_steps.hpp"
#include "cuda/instance_scores.hpp"
#include "cuda/phase_gather_thread.hpp"
#include "flash_case.hpp"
#include "grape/builtins.hpp"
#include "grape/check/attention_case.hpp"
#include "grape/check/device_emulation.hpp"
#include "hour_of_day_rope.hpp"
#include "instance_steps.hpp"
#include "log_distance.hpp"
#include "quaternion_rope.hpp"

namespace grape {
namespace {

using emulation::gather_phases;
using emulation::gathered_phases;
using emulation::instance_of;
using emulation::plane_spec_of;
using emulation::rotate_as_the_device;
using emulation::rotates;

/// What cuda::attention hands the flash program for a CPU call: the call's arguments as the device
/// takes them (seq_len the longest sequence when packed), Q and K rotated as the device rotates
/// them into buffers of the inputs' strides, each token's bias position where the scores read one
/// (the device kernel's body), and the flash operands over them.
template <class I, class T>
struct device_operands {
  cpu::attention_args a;
  std::vector<T> q_rot, k_rot;
  std::vector<std::int64_t> positions;
  int error = 0;
  cuda::flash_args ops;

  device_operands(const attention_case<I, T>& c, bool bias_positions) : a(c.args) {
    if (a.qk.cu_seqlens) a.qk.seq_len = *std::max_element(c.len.begin(), c.len.end());
    const void* q = a.qk.q.in;
    const void* k = a.qk.k.in;
    if constexpr (rotates<I>) {
      q_rot.resize(static_cast<std::size_t>(a.qk.q.size));
      k_rot.resize(static_cast<std::size_t>(a.qk.k.size));
      rotate_as_the_device(c.inst, a.qk, c.total, q_rot.data(), k_rot.data());
      q = q_rot.data();
      k = k_rot.data();
    }
    if (bias_positions && cuda::has_bias_positions(a.qk))
      for (std::int64_t t = 0; t < c.total; ++t) positions.push_back(cuda::position_source_of(a.qk).at(t));
    ops = cuda::attention_operands(a, q, k, positions.empty() ? nullptr : positions.data(), c.inst.content_dim(),
                                   c.total, &error);
  }
  device_operands(const device_operands&) = delete;  // ops points into the members
  device_operands& operator=(const device_operands&) = delete;
};

/// The host steps of cuda::attention on a CPU attention call; the output lands in c.out.
template <class I, class T>
void emulate_cuda_attention(attention_case<I, T>& c) {
  cuda::host_placement place;
  const auto scores = cuda::instance_scores(c.inst, place);
  const device_operands<I, T> d(c, !decltype(scores)::none);
  const cuda::flash_args& ops = d.ops;
  const cuda::flash_plan plan = cuda::plan_flash(ops, 100 * 1024);
  RC_ASSERT(plan.rows > 0);
  flash_test::emulate<T>(ops, plan, scores);
  RC_ASSERT(d.error == 0);
}

/// The host steps of cuda::attention_backward after cpu::attention's forward (its out and lse):
/// the rotation again, the flash backward into the rotated operands' gradients (and the bias
/// parameters' gradient through its partials), contextual GRAPE-M's θ and Φ gradients (the
/// per-token ones scattered by the device body), rotation planes' θ gradient (the device bodies
/// on the call's inputs and the rotated operands' gradients), the rotation's transpose; against
/// cpu::attention_backward, the largest difference over the largest entry of each gradient.
template <class I>
double backward_difference(attention_case<I, float>& c, std::mt19937_64& rng) {
  cpu::attention(c.inst, c.args);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> dout(c.out.size());
  for (auto& x : dout) x = g(rng);
  std::vector<float> want_dq(c.q.size()), want_dk(c.k.size()), want_dv(c.v.size());
  cuda::host_placement place;
  const auto scores = cuda::instance_scores(c.inst, place);
  using scores_type = std::remove_cvref_t<decltype(scores)>;
  constexpr bool bias_grads = cuda::has_bias_grads<scores_type>::value || cuda::walks_rows<scores_type>::value;
  std::vector<double> want_grad_bias, grad_bias, rows, cols;
  if constexpr (bias_grads) {
    want_grad_bias.assign(kernel::bias_part(c.inst)->parameter_count(), 0.0);
    grad_bias.assign(static_cast<std::size_t>(scores.grad_size(static_cast<int>(c.heads))), 0.0);
    std::int64_t row_partials = 0, col_partials = 0;
    cuda::bias_partials_size(scores, static_cast<int>(c.heads), c.total, row_partials, col_partials);
    rows.assign(static_cast<std::size_t>(row_partials), 0.0);
    cols.assign(static_cast<std::size_t>(col_partials), 0.0);
  }
  constexpr bool by_phase = cpu::rotates_by_phase<I>;
  const std::optional<rotary_spec> planes = plane_spec_of(c.inst);  // frequencies of rotation planes too
  const bool freqs = by_phase || planes;
  std::vector<double> want_dfreq, want_dphase, dfreq, dphase;
  if constexpr (by_phase) {
    want_dfreq.assign(c.inst.freqs.size(), 0.0);
    want_dphase.assign(c.inst.phases.size(), 0.0);
    dfreq.assign(want_dfreq.size(), 0.0);
    dphase.assign(want_dphase.size(), std::numeric_limits<double>::quiet_NaN());
  }
  if (planes) {
    want_dfreq.assign(static_cast<std::size_t>(planes->rotary_dim / 2), 0.0);
    dfreq.assign(want_dfreq.size(), std::numeric_limits<double>::quiet_NaN());
  }
  cpu::attention_backward(c.inst, c.args,
                          {dout.data(), want_dq.data(), want_dk.data(), want_dv.data(),
                           bias_grads ? want_grad_bias.data() : nullptr, freqs ? want_dfreq.data() : nullptr,
                           by_phase ? want_dphase.data() : nullptr});

  const device_operands<I, float> d(c, !decltype(scores)::none);
  const cpu::attention_args& a = d.a;
  const cuda::flash_args& ops = d.ops;
  constexpr bool rotated = rotates<I>;
  std::vector<float> dq_rot(c.q.size()), dk_rot(c.k.size()), dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  const cuda::flash_grads fg{dout.data(),
                             rotated ? dq_rot.data() : dq.data(),
                             rotated ? dk_rot.data() : dk.data(),
                             dv.data(),
                             bias_grads ? grad_bias.data() : nullptr,
                             rows.data(),
                             cols.empty() ? nullptr : cols.data()};
  const cuda::flash_plan plan = cuda::plan_flash_backward(ops, 150 * 1024);
  flash_test::emulate_backward<float>(ops, fg, plan, scores);
  if constexpr (by_phase) {
    const gathered_phases g = gather_phases(c.inst, a.qk, c.total);
    const cpu::rotate_qk_args forward = kernel::without_positions(a.qk);
    std::vector<double> per_token(g.values.size()), origins(g.values.size());
    const cuda::phase_table_call call{c.inst.phase_rows, c.inst.length, cuda::position_source_of(a.qk), c.total};
    const cuda::phase_origin origin{call, g.values.data(), origins.data()};
    for (std::int64_t item = 0; item < call.items(); ++item) origin(item);
    cpu::grape_m_spec spec = g.spec;
    spec.phase_origin = origins.data();
    cpu::grape_m_param_grads(spec, forward, dq_rot.data(), dk_rot.data(), {dfreq.data(), per_token.data()});
    std::fill(dphase.begin(), dphase.end(), 0.0);  // as the launch zeroes it
    const cuda::phase_scatter scatter{call, per_token.data(), dphase.data()};
    for (std::int64_t item = 0; item < call.items(); ++item) scatter(item);
    cpu::grape_m_rotate_qk_backward(g.spec, kernel::without_positions(cuda::rotation_back(
                                                a.qk, dq_rot.data(), dk_rot.data(), dq.data(), dk.data(), c.total, c.d)));
  } else if constexpr (rotated) {
    const cpu::rotate_qk_args back =
        cuda::rotation_back(a.qk, dq_rot.data(), dk_rot.data(), dq.data(), dk.data(), c.total, c.d);
    if (planes)
      RC_ASSERT(detail::emulate_freq_grad<float>(*planes, kernel::rotation_of(a.qk), back, c.total, 32, dfreq.data(), 0,
                                                 cpu::position_origin::sequence_start) == 0);
    cpu::rotate_qk_backward(rotation_part(c.inst), back);
  }
  RC_ASSERT(d.error == 0);
  // Each gradient's largest difference over its largest entry, or over 10⁻³ of dL/dV's largest
  // (the size of dL/dO) where the gradient is 0 in exact arithmetic (one token: dQ, dK, dΦ) and
  // both sides hold only their float32 rounding.
  double floor = 1e-30;
  for (float x : want_dv) floor = std::max(floor, 1e-3 * std::abs(static_cast<double>(x)));
  const auto relative = [floor](const auto& got, const auto& want) {
    double diff = 0, scale = floor;
    for (std::size_t e = 0; e < got.size(); ++e) {
      diff = std::max(diff, std::abs(static_cast<double>(got[e]) - static_cast<double>(want[e])));
      scale = std::max(scale, std::abs(static_cast<double>(want[e])));
    }
    return diff / scale;
  };
  RC_ASSERT(grad_bias.size() == want_grad_bias.size());
  return std::max({relative(dq, want_dq), relative(dk, want_dk), relative(dv, want_dv),
                   bias_grads ? relative(grad_bias, want_grad_bias) : 0.0,
                   freqs ? relative(dfreq, want_dfreq) : 0.0, by_phase ? relative(dphase, want_dphase) : 0.0});
}


template <class E, class T = float>
void matches_reference(std::uint64_t seed, std::int64_t position_base, std::int64_t span = 450) {
  std::mt19937_64 rng(seed);
  const auto inst = instance_of<E>(rng);
  attention_case<typename E::instance, T> c(rng, inst, encoding_heads(inst), 100, position_base, span);
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
  property("grape_m_contextual", 79, 8, [](std::uint64_t s) { matches_reference<grape_m_contextual>(s, 0, 450); });
}

TEST(AttentionInstanceEmulation, ScoreBiasesAndCompositionsMatchTheDenseReference) {
  property("alibi", 75, 10, [](std::uint64_t s) { matches_reference<alibi>(s, 100000); });
  property("alibi bf16", 76, 5, [](std::uint64_t s) { matches_reference<alibi, Eigen::bfloat16>(s, 100000); });
  property("t5", 77, 10, [](std::uint64_t s) { matches_reference<t5_buckets>(s, 0); });
  property("fox", 78, 10, [](std::uint64_t s) { matches_reference<fox>(s, 0); });
  property("grape_a_key_gated", 79, 10, [](std::uint64_t s) { matches_reference<grape_a_key_gated>(s, 0); });
  property("grape_a_qk_gated", 80, 10, [](std::uint64_t s) { matches_reference<grape_a_qk_gated>(s, 0); });
  property("grape_ap_relative", 96, 10, [](std::uint64_t s) { matches_reference<grape_ap_relative>(s, 0); });
  property("rope_alibi", 81, 10, [](std::uint64_t s) { matches_reference<rope_alibi>(s, 5000); });
  property("grape_a (lift)", 94, 10, [](std::uint64_t s) { matches_reference<grape_a>(s, 200); });
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
  attention_case<typename E::instance, float> c(rng, inst, encoding_heads(inst), 100, position_base, 450);
  const double e = backward_difference(c, rng);
  RC_LOG() << E::name << ": tokens " << c.total << " heads " << c.heads << "/" << c.kv_heads << " d " << c.d
           << " causal " << c.args.causal << " window " << c.args.window << " gradient difference " << e << "\n";
  RC_ASSERT(e < 1e-4);
}

TEST(AttentionInstanceEmulation, BackwardMatchesTheCpuBackward) {
  property("rope", 85, 6, [](std::uint64_t s) { backward_matches_the_cpu<rope>(s, 1000); });
  property("rope_alibi", 86, 6, [](std::uint64_t s) { backward_matches_the_cpu<rope_alibi>(s, 5000); });
  property("fox", 87, 6, [](std::uint64_t s) { backward_matches_the_cpu<fox>(s, 0); });
  property("alibi", 90, 6, [](std::uint64_t s) { backward_matches_the_cpu<alibi>(s, 100000); });
  property("t5", 91, 6, [](std::uint64_t s) { backward_matches_the_cpu<t5_buckets>(s, 0); });
  property("grape_a_key_gated", 92, 6, [](std::uint64_t s) { backward_matches_the_cpu<grape_a_key_gated>(s, 0); });
  property("grape_a_qk_gated", 93, 6, [](std::uint64_t s) { backward_matches_the_cpu<grape_a_qk_gated>(s, 0); });
  property("grape_m_contextual", 94, 8, [](std::uint64_t s) { backward_matches_the_cpu<grape_m_contextual>(s, 0); });
  property("grape_ap_relative", 97, 8, [](std::uint64_t s) { backward_matches_the_cpu<grape_ap_relative>(s, 0); });
  property("grape_a (lift)", 95, 6, [](std::uint64_t s) { backward_matches_the_cpu<grape_a>(s, 200); });
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

TEST(AttentionInstanceEmulation, ALiftOnTheContentChannelsIsRefused) {
  auto inst = grape_a::make(grape_a::default_params());
  const int d = inst.content_dim();
  std::vector<double> u(d + 2, 0.0), v(d + 2, 0.0);
  u[0] = 1.0;  // vᵀu = 0 still, but the lift now mixes a content channel into the bias
  v[d] = 1.0;
  inst.reps[0] = unipotent_lift(u, v);
  cuda::host_placement place;
  EXPECT_THROW(cuda::instance_scores(inst, place), input_error);
}

TEST(AttentionInstanceEmulation, BadCallsAreRefusedBeforeAnyLaunch) {
  std::mt19937_64 rng(5);
  const auto inst = instance_of<alibi>(rng);
  attention_case<alibi::instance, float> c(rng, inst, encoding_heads(inst), 40, 0, 100);
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
