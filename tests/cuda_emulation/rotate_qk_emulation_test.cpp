// CPU emulation of the CUDA rotate_qk kernel: the per-thread body (kernels/cuda) runs here over
// the same grid it gets on the device — every block (token) and thread index, both phases with the
// barrier between them — and must reproduce the CPU kernel. Indexing, vector widths (16-byte
// chunks and the scalar fallback), tails, layouts, GQA and partial rotary are tested without a GPU.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <random>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "cuda/host_storage.hpp"
#include "qk_operand.hpp"
#include "grape/check/device_emulation.hpp"
#include "grape/rep/rotation_planes.hpp"

namespace grape {
namespace {

struct scenario {
  int head_dim, rotary_dim, q_heads, k_heads;
  std::int64_t batch, seq_len;
  bool interleaved, in_place, varlen, int32_positions, heads_major;
  bool cached = false;    // cos/sin from a float32 cache instead of on the fly
  bool backward = false;  // rotation by −angle (rotate_qk_backward)
};

/// RoPE over the scenario's rotary channels, with an attention factor.
rotary_spec spec_of(const scenario& s) {
  rotary_spec spec;
  spec.head_dim = s.head_dim;
  spec.rotary_dim = s.rotary_dim;
  spec.layout = s.interleaved ? layout_kind::interleaved : layout_kind::half_split;
  spec.inv_freq = rope_inv_freq(s.rotary_dim, 10000.0);
  spec.attention_factor = 1.25;
  return spec;
}

template <class T>
void run_scenario(const scenario& s, std::uint64_t seed, int block) {
  std::mt19937_64 rng(seed);
  rotary_spec spec = spec_of(s);
  const std::int64_t tokens = s.batch * s.seq_len;
  std::vector<std::int64_t> cu_seqlens(s.batch + 1);
  for (std::int64_t b = 0; b <= s.batch; ++b) cu_seqlens[b] = b * s.seq_len;
  std::vector<std::int64_t> pos64(tokens);
  std::vector<std::int32_t> pos32(tokens);
  const std::int64_t max_position = s.cached ? 5000 : 2'000'000'000;
  std::uniform_int_distribution<std::int64_t> pos(0, max_position - 1);
  const cpu::rotary_cache cache = s.cached ? cpu::rotary_cache::build(spec, max_position) : cpu::rotary_cache{};
  for (std::int64_t t = 0; t < tokens; ++t) pos32[t] = static_cast<std::int32_t>(pos64[t] = pos(rng));
  std::normal_distribution<float> g(0.0f, 1.0f);
  auto tensor = [&](int heads) {
    std::vector<T> v(tokens * heads * s.head_dim);
    for (auto& x : v) x = static_cast<T>(g(rng));
    return v;
  };
  std::vector<T> q = tensor(s.q_heads), k = tensor(s.k_heads);
  std::vector<T> q_cpu(s.in_place ? q : std::vector<T>(q.size())), k_cpu(s.in_place ? k : std::vector<T>(k.size()));
  std::vector<T> q_gpu = q_cpu, k_gpu = k_cpu;

  auto make_args = [&](std::vector<T>& qo, std::vector<T>& ko) {
    cpu::rotate_qk_args a;
    a.type = std::is_same_v<T, float> ? cpu::dtype::f32 : std::is_same_v<T, Eigen::half> ? cpu::dtype::f16 : cpu::dtype::bf16;
    auto operand = [&](const std::vector<T>& in, std::vector<T>& out, int heads) {
      return test::qk_operand(in, out, heads, s.seq_len, s.head_dim, s.in_place, s.heads_major);
    };
    a.q = operand(q, qo, s.q_heads);
    a.k = operand(k, ko, s.k_heads);
    a.batch = s.batch;
    a.seq_len = s.seq_len;
    if (s.varlen) a.cu_seqlens = cu_seqlens.data();
    a.position_ids = s.int32_positions ? static_cast<const void*>(pos32.data()) : pos64.data();
    a.position_type = s.int32_positions ? cpu::index_type::i32 : cpu::index_type::i64;
    if (s.cached) a.cache = &cache;
    return a;
  };
  const auto cpu_args = make_args(q_cpu, k_cpu);
  if (s.backward) cpu::rotate_qk_backward(spec, cpu_args);
  else cpu::rotate_qk(spec, cpu_args);
  const auto gpu_args = make_args(q_gpu, k_gpu);
  const kernel::device_indices device{tokens};  // as the CUDA host plans: no index reads
  auto owned = kernel::make_rotate_plan(spec, gpu_args, &device);
  if (s.backward) owned.plan.sin_sign = -1.0f;  // as grape::cuda::rotate_qk_backward sets it
  const std::int64_t rows = s.cached ? max_position : 0;
  const int flag = detail::emulate_rotary_call<T>(owned.plan, spec, gpu_args, block, rows);
  RC_ASSERT(flag == 0);
  const double tol = std::is_same_v<T, float> ? 2e-6 : std::is_same_v<T, Eigen::half> ? 2e-3 : 1.6e-2;
  for (std::size_t i = 0; i < q_cpu.size(); ++i)
    RC_ASSERT(std::abs(static_cast<double>(q_cpu[i]) - static_cast<double>(q_gpu[i])) <= tol * (1 + std::abs(static_cast<double>(q_cpu[i]))));
  for (std::size_t i = 0; i < k_cpu.size(); ++i)
    RC_ASSERT(std::abs(static_cast<double>(k_cpu[i]) - static_cast<double>(k_gpu[i])) <= tol * (1 + std::abs(static_cast<double>(k_cpu[i]))));
}

rc::Gen<scenario> scenarios() {
  return rc::gen::exec([] {
    const int rotary_planes = *rc::gen::inRange(1, 40);
    const int extra = *rc::gen::inRange(0, 20);
    const bool varlen = *rc::gen::arbitrary<bool>();
    return scenario{2 * rotary_planes + extra, 2 * rotary_planes, *rc::gen::inRange(1, 6), *rc::gen::inRange(1, 3),
                    *rc::gen::inRange<std::int64_t>(1, 4), *rc::gen::inRange<std::int64_t>(1, 9),
                    *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>(), varlen,
                    *rc::gen::arbitrary<bool>(), !varlen && *rc::gen::arbitrary<bool>(),
                    *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>()};
  });
}

RC_GTEST_PROP(CudaEmulation, Float32AnyShape, ()) {
  run_scenario<float>(*scenarios(), *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(7, 32, 256));
}
RC_GTEST_PROP(CudaEmulation, Float16AnyShape, ()) {
  run_scenario<Eigen::half>(*scenarios(), *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(7, 32, 256));
}
RC_GTEST_PROP(CudaEmulation, Bfloat16AnyShape, ()) {
  run_scenario<Eigen::bfloat16>(*scenarios(), *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(7, 32, 256));
}

/// dL/dθ (rotate_freq_grad_thread.hpp, emulated on the host's plans) against
/// cpu::rotate_qk_inv_freq_grad on the same inputs and random dL/d(rotated Q, K): the rotation
/// scenarios' shapes, with planes on three position axes (M-RoPE) when `axes` is 3, positions
/// counted from 0 or from each sequence's start.
template <class T>
void freq_grad_scenario(const scenario& s, int axes, cpu::position_origin origin, std::uint64_t seed, int block) {
  std::mt19937_64 rng(seed);
  rotary_spec spec = spec_of(s);
  spec.num_axes = axes;
  if (axes > 1)
    for (int i = 0; i < s.rotary_dim / 2; ++i) spec.plane_axis.push_back(i % axes);
  const std::int64_t tokens = s.batch * s.seq_len;
  std::vector<std::int64_t> cu_seqlens(s.batch + 1), positions(axes * tokens);
  for (std::int64_t b = 0; b <= s.batch; ++b) cu_seqlens[b] = b * s.seq_len;
  std::uniform_int_distribution<std::int64_t> pos(0, 100000);
  for (auto& m : positions) m = pos(rng);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const auto tensor = [&](int heads) {
    std::vector<T> v(tokens * heads * s.head_dim);
    for (auto& x : v) x = static_cast<T>(g(rng));
    return v;
  };
  std::vector<T> q = tensor(s.q_heads), k = tensor(s.k_heads), gq = tensor(s.q_heads), gk = tensor(s.k_heads);
  const auto args_over = [&](std::vector<T>& qv, std::vector<T>& kv) {
    cpu::rotate_qk_args a;
    a.type = std::is_same_v<T, float> ? cpu::dtype::f32 : std::is_same_v<T, Eigen::half> ? cpu::dtype::f16 : cpu::dtype::bf16;
    a.q = test::qk_operand(qv, qv, s.q_heads, s.seq_len, s.head_dim, true, s.heads_major);
    a.k = test::qk_operand(kv, kv, s.k_heads, s.seq_len, s.head_dim, true, s.heads_major);
    a.batch = s.batch;
    a.seq_len = s.seq_len;
    if (s.varlen) a.cu_seqlens = cu_seqlens.data();
    a.position_ids = positions.data();
    a.position_type = cpu::index_type::i64;
    return a;
  };
  const cpu::rotate_qk_args forward = args_over(q, k), grads = args_over(gq, gk);
  std::vector<double> want(s.rotary_dim / 2), got(want.size());
  cpu::rotate_qk_inv_freq_grad(spec, forward, gq.data(), gk.data(), want.data(), origin);
  RC_ASSERT(detail::emulate_freq_grad<T>(spec, forward, grads, tokens, block, got.data(), 0, origin) == 0);
  double scale = 1e-300;
  for (double w : want) scale = std::max(scale, std::abs(w));
  // Each side rounds its float32 cos/sin table its own way (the CPU's may be vectorised): 1 ulp of the
  // table, times positions up to 10⁵, is what separates them.
  for (std::size_t i = 0; i < want.size(); ++i) RC_ASSERT(std::abs(got[i] - want[i]) <= 2e-6 * scale);
}

RC_GTEST_PROP(CudaEmulation, FrequencyGradientMatchesTheCpu, ()) {
  const auto origin = *rc::gen::element(cpu::position_origin::zero, cpu::position_origin::sequence_start);
  freq_grad_scenario<float>(*scenarios(), *rc::gen::element(1, 3), origin, *rc::gen::arbitrary<std::uint64_t>(),
                            *rc::gen::element(7, 32, 256));
}
RC_GTEST_PROP(CudaEmulation, Bfloat16FrequencyGradientMatchesTheCpu, ()) {
  freq_grad_scenario<Eigen::bfloat16>(*scenarios(), 1, cpu::position_origin::sequence_start,
                                      *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(7, 32));
}

TEST(CudaEmulation, Llama128HeadDimUsesSixteenByteChunks) {
  // 32 query heads, 8 KV heads, d = 128: the shape of the bandwidth target, scaled down.
  const scenario s{128, 128, 32, 8, 2, 5, false, true, false, false, false};
  rc::detail::TestParams params;
  params.maxSuccess = 3;
  const auto r = rc::detail::checkProperty(rc::detail::toProperty([&] { run_scenario<Eigen::bfloat16>(s, 3, 256); }),
                                           rc::detail::TestMetadata{}, params);
  EXPECT_TRUE(r.template is<rc::detail::SuccessResult>());
}

TEST(CudaEmulation, PositionOutsideTheLimitSetsTheFlagAndLeavesTheTokenUntouched) {
  rotary_spec spec{8, 8, layout_kind::half_split, rope_inv_freq(8, 10000.0), 1.0, 1, {}};
  std::vector<float> q(8, 1.0f);
  std::vector<std::int64_t> positions = {-3};
  kernel::rotate_plan p;
  p.q = {q.data(), q.data(), 1, 0, 8, 8};
  p.head_dim = p.rotary_dim = 8;
  p.seq_len = p.total_tokens = 1;
  p.position_ids = positions.data();
  const auto turns = kernel::turn_fractions_of(spec.inv_freq);
  p.turn_fractions = turns.data();
  EXPECT_EQ((detail::emulate_rotary_body<float, 4, layout_kind::half_split>(p, 32, std::int64_t{1} << 40)), 1);
  for (float v : q) EXPECT_EQ(v, 1.0f);
}

}  // namespace
}  // namespace grape
