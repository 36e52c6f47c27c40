// CPU emulation of the CUDA GRAPE-M rotation (kernels/cuda/grape_m_thread.hpp): the per-thread
// body runs here over the grid it gets on the device — every block (token) and thread index, both
// phases with the barrier between them — on the call the CUDA host plans (plan_grape_m_launch,
// no reads of index arrays or phases), and must reproduce cpu::grape_m_rotate_qk and its backward:
// a row of θ per key head or one shared, integer positions or real phases (one row or one per key
// head), both layouts, both angle signs, GQA, varlen, in and out of place, f32/f16/bf16, with the
// shared cos/sin table and without it. One shared row of θ >= 0 with integer positions takes the
// rotate_qk kernel, as the host routes it. The parameter gradients' body (grape_m_grads_thread.hpp)
// against cpu::grape_m_param_grads the same way.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "cpu/grape_m.hpp"
#include "common/grape_m_plan.hpp"
#include "cuda/grape_m_call.hpp"
#include "cuda/host_storage.hpp"
#include "qk_operand.hpp"
#include "grape/check/device_emulation.hpp"

namespace grape {
namespace {

/// A two-phase body over tokens × `block` threads; the error flag.
template <class Body>
int emulate_tokens(const Body& f, const cuda::grape_m_call& c, int block) {
  std::vector<float> table(static_cast<std::size_t>(c.table_floats()) + 1);
  for (std::int64_t token = 0; token < c.p.total_tokens; ++token) {
    for (int tid = 0; tid < block; ++tid) f.fill_table(token, tid, block, table.data());
    for (int tid = 0; tid < block; ++tid) f.rotate(token, tid, block, table.data());
  }
  return *c.error_flag;
}

template <class T, math::layout_kind L>
int emulate_body(const cuda::grape_m_launch& l, int block) {
  return emulate_tokens(cuda::grape_m_token_thread<T, L>{l.call}, l.call, block);
}

/// What cuda::grape_m_rotate_qk(_backward) computes for this call, on the host.
template <class T>
int emulate_call(const cpu::grape_m_spec& spec, const cpu::rotate_qk_args& args, std::int64_t total_tokens,
                 int block, bool backward, bool without_table) {
  int flag = 0;
  const kernel::device_indices device{total_tokens};
  if (const auto rotary = kernel::grape_m_rotary_spec(spec)) {  // grape_m_host.cpp's route
    kernel::owned_plan o = kernel::make_rotate_plan(*rotary, args, &device);
    o.plan.sin_sign = backward != (spec.angle_sign < 0) ? -1.0f : 1.0f;
    return detail::emulate_rotary_call<T>(o.plan, *rotary, args, block);
  }
  const cuda::grape_m_host_tables tables = cuda::host_tables_of(spec);
  cuda::grape_m_launch l =
      cuda::plan_grape_m_launch(spec, {tables.fractions.data(), tables.turns.data()}, args, total_tokens, &flag, backward);
  if (without_table) l.call.table = false;
  return spec.layout == math::layout_kind::half_split ? emulate_body<T, math::layout_kind::half_split>(l, block)
                                                      : emulate_body<T, math::layout_kind::interleaved>(l, block);
}

struct scenario {
  int planes, extra, group, kv_heads;
  std::int64_t batch, seq_len;
  bool interleaved, in_place, varlen, heads_major, int32_positions;
  bool per_head_freqs;
  int phase_rows;  // 0: integer positions; 1 or the key heads
  int angle_sign;
  bool backward, without_table, negative_freq;
};

template <class T>
constexpr cpu::dtype dtype_of() {
  return std::is_same_v<T, float> ? cpu::dtype::f32 : std::is_same_v<T, Eigen::half> ? cpu::dtype::f16 : cpu::dtype::bf16;
}

/// Each entry within 10⁻⁵ of the largest |entry| of `want` (the device's cos/sin are float32, the
/// CPU's float64).
void expect_close_gradients(const std::vector<double>& want, const std::vector<double>& got) {
  double scale = 1e-12;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i) RC_ASSERT(std::abs(want[i] - got[i]) <= 1e-5 * scale);
}

/// The gradient body (grape_m_grads_thread.hpp) on the call the CUDA host plans, against
/// cpu::grape_m_param_grads.
template <class T>
void compare_gradients(const cpu::grape_m_spec& spec, const cpu::rotate_qk_args& forward, const std::vector<T>& gq,
                       const std::vector<T>& gk, std::int64_t tokens, int block, bool without_table) {
  const std::size_t nf = static_cast<std::size_t>(spec.freq_rows) * spec.planes;
  const std::size_t np = spec.phases != nullptr ? static_cast<std::size_t>(spec.phase_rows * tokens) : 0;
  std::vector<double> df_cpu(nf), dp_cpu(np), df_dev(nf, 0.0), dp_dev(np, 0.0);  // the host zeroes the device's
  cpu::grape_m_param_grads(spec, forward, gq.data(), gk.data(), {df_cpu.data(), np ? dp_cpu.data() : nullptr});
  int flag = 0;
  const cuda::grape_m_host_tables tables = cuda::host_tables_of(spec);
  cuda::grape_m_grads_launch l = cuda::plan_grape_m_grads_launch(
      spec, {tables.fractions.data(), tables.turns.data()}, tables.thetas.data(), forward, gq.data(), gk.data(),
      {df_dev.data(), np ? dp_dev.data() : nullptr}, tokens, &flag);
  if (without_table) l.call.c.table = false;
  const int f = spec.layout == math::layout_kind::half_split
                    ? emulate_tokens(cuda::grape_m_grads_thread<T, math::layout_kind::half_split>{l.call}, l.call.c, block)
                    : emulate_tokens(cuda::grape_m_grads_thread<T, math::layout_kind::interleaved>{l.call}, l.call.c, block);
  RC_ASSERT(f == 0);
  expect_close_gradients(df_cpu, df_dev);
  expect_close_gradients(dp_cpu, dp_dev);
}

template <class T>
void run_scenario(const scenario& s, std::uint64_t seed, int block, bool gradients = false) {
  std::mt19937_64 rng(seed);
  const int head_dim = 2 * s.planes + s.extra;
  const int q_heads = s.group * s.kv_heads;
  const std::int64_t tokens = s.batch * s.seq_len;
  std::uniform_real_distribution<double> freq(0.0, 1.5);
  std::vector<double> freqs(static_cast<std::size_t>((s.per_head_freqs ? s.kv_heads : 1) * s.planes));
  for (auto& f : freqs) f = freq(rng);
  if (s.negative_freq) freqs[0] = -freqs[0];
  const int phase_rows = s.phase_rows == 0 ? 1 : (s.phase_rows == 1 ? 1 : s.kv_heads);
  std::vector<double> phases(static_cast<std::size_t>(phase_rows * tokens));
  std::uniform_real_distribution<double> phase(-3e5, 3e5);
  for (auto& p : phases) p = phase(rng);
  std::vector<std::int64_t> cu_seqlens(s.batch + 1), pos64(tokens);
  std::vector<std::int32_t> pos32(tokens);
  for (std::int64_t b = 0; b <= s.batch; ++b) cu_seqlens[b] = b * s.seq_len;
  std::uniform_int_distribution<std::int64_t> pos(0, 2'000'000'000);
  for (std::int64_t t = 0; t < tokens; ++t) pos32[t] = static_cast<std::int32_t>(pos64[t] = pos(rng));

  cpu::grape_m_spec spec;
  spec.head_dim = head_dim;
  spec.planes = s.planes;
  spec.layout = s.interleaved ? math::layout_kind::interleaved : math::layout_kind::half_split;
  spec.freqs = freqs.data();
  spec.freq_rows = s.per_head_freqs ? s.kv_heads : 1;
  spec.phases = s.phase_rows == 0 ? nullptr : phases.data();
  spec.phase_rows = phase_rows;
  spec.angle_sign = s.angle_sign;

  std::normal_distribution<float> g(0.0f, 1.0f);
  auto tensor = [&](int heads) {
    std::vector<T> v(static_cast<std::size_t>(tokens * heads * head_dim));
    for (auto& x : v) x = static_cast<T>(g(rng));
    return v;
  };
  const std::vector<T> q = tensor(q_heads), k = tensor(s.kv_heads);
  std::vector<T> q_cpu(s.in_place ? q : std::vector<T>(q.size())), k_cpu(s.in_place ? k : std::vector<T>(k.size()));
  std::vector<T> q_gpu = q_cpu, k_gpu = k_cpu;
  auto make_args = [&](std::vector<T>& qo, std::vector<T>& ko) {
    cpu::rotate_qk_args a;
    a.type = dtype_of<T>();
    auto operand = [&](const std::vector<T>& in, std::vector<T>& out, int heads) {
      return test::qk_operand(in, out, heads, s.seq_len, head_dim, s.in_place, s.heads_major);
    };
    a.q = operand(q, qo, q_heads);
    a.k = operand(k, ko, s.kv_heads);
    a.batch = s.batch;
    a.seq_len = s.seq_len;
    if (s.varlen) a.cu_seqlens = cu_seqlens.data();
    if (s.phase_rows == 0) {
      a.position_ids = s.int32_positions ? static_cast<const void*>(pos32.data()) : pos64.data();
      a.position_type = s.int32_positions ? cpu::index_type::i32 : cpu::index_type::i64;
    }
    return a;
  };
  if (gradients)  // the forward call's inputs are q and k (in place: their copies)
    return compare_gradients(spec, make_args(q_cpu, k_cpu), tensor(q_heads), tensor(s.kv_heads), tokens, block,
                             s.without_table);
  const cpu::rotate_qk_args cpu_args = make_args(q_cpu, k_cpu);
  if (s.backward) cpu::grape_m_rotate_qk_backward(spec, cpu_args);
  else cpu::grape_m_rotate_qk(spec, cpu_args);
  const int flag = emulate_call<T>(spec, make_args(q_gpu, k_gpu), tokens, block, s.backward, s.without_table);
  RC_ASSERT(flag == 0);
  // The same turn fractions and float32 rotation: equal up to float32 contraction differences.
  const double tol = std::is_same_v<T, float> ? 2e-6 : std::is_same_v<T, Eigen::half> ? 2e-3 : 1.6e-2;
  auto close = [&](const std::vector<T>& a, const std::vector<T>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
      RC_ASSERT(std::abs(x - y) <= tol * (1 + std::abs(x)));
    }
  };
  close(q_cpu, q_gpu);
  close(k_cpu, k_gpu);
}

rc::Gen<scenario> scenarios() {
  return rc::gen::exec([] {
    const bool varlen = *rc::gen::arbitrary<bool>();
    const int kv_heads = *rc::gen::inRange(1, 4);
    const int phase_mode = *rc::gen::inRange(0, 3);
    return scenario{*rc::gen::inRange(1, 40), *rc::gen::inRange(0, 9), *rc::gen::inRange(1, 4), kv_heads,
                    *rc::gen::inRange<std::int64_t>(1, 4), *rc::gen::inRange<std::int64_t>(1, 9),
                    *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>(), varlen,
                    !varlen && *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>(),
                    *rc::gen::arbitrary<bool>(), phase_mode, *rc::gen::element(1, -1),
                    *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>()};
  });
}

RC_GTEST_PROP(GrapeMCudaEmulation, Float32AnyShape, ()) {
  run_scenario<float>(*scenarios(), *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(1, 7, 32, 256));
}
RC_GTEST_PROP(GrapeMCudaEmulation, Float16AnyShape, ()) {
  run_scenario<Eigen::half>(*scenarios(), *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(7, 32, 256));
}
RC_GTEST_PROP(GrapeMCudaEmulation, Bfloat16AnyShape, ()) {
  run_scenario<Eigen::bfloat16>(*scenarios(), *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(7, 32, 256));
}

RC_GTEST_PROP(GrapeMCudaEmulation, ParameterGradientsFloat32, ()) {
  run_scenario<float>(*scenarios(), *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(1, 7, 32, 256), true);
}
RC_GTEST_PROP(GrapeMCudaEmulation, ParameterGradientsBfloat16, ()) {
  run_scenario<Eigen::bfloat16>(*scenarios(), *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::element(7, 32), true);
}

/// A one-token call of 1 head, 2 planes, per-head rows: the spec and arguments of the flag tests.
struct one_token {
  std::vector<float> q = std::vector<float>(4, 1.0f), k = std::vector<float>(4, 1.0f);
  std::vector<double> freqs = {0.5, 0.25};
  std::vector<double> phases = {0.0};
  std::vector<std::int64_t> positions = {0};
  cpu::grape_m_spec spec() {
    cpu::grape_m_spec s;
    s.head_dim = 4;
    s.planes = 2;
    s.freqs = freqs.data();
    s.freq_rows = 1;
    return s;
  }
  cpu::rotate_qk_args args() {
    cpu::rotate_qk_args a;
    a.q = {q.data(), q.data(), 1, 4, 0, 4, 4};
    a.k = {k.data(), k.data(), 1, 4, 0, 4, 4};
    a.seq_len = 1;
    return a;
  }
};

TEST(GrapeMCudaEmulation, NonFinitePhaseSetsTheFlagAndLeavesTheTokenUntouched) {
  one_token c;
  c.phases[0] = std::numeric_limits<double>::quiet_NaN();  // the device does not read phases on the host
  cpu::grape_m_spec spec = c.spec();
  spec.phases = c.phases.data();
  EXPECT_EQ(emulate_call<float>(spec, c.args(), 1, 32, false, false), 1);
  c.phases[0] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(emulate_call<float>(spec, c.args(), 1, 32, false, true), 1);
  for (float v : c.q) EXPECT_EQ(v, 1.0f);
  for (float v : c.k) EXPECT_EQ(v, 1.0f);
}

TEST(GrapeMCudaEmulation, PositionOutsideTheLimitSetsTheFlagAndLeavesTheTokenUntouched) {
  one_token c;
  c.freqs[1] = -0.25;  // not a rotary spec: the GRAPE-M body takes the call
  c.positions[0] = -3;
  cpu::rotate_qk_args args = c.args();
  args.position_ids = c.positions.data();
  EXPECT_EQ(emulate_call<float>(c.spec(), args, 1, 32, false, false), 1);
  c.positions[0] = 7;
  args.max_position = 7;
  EXPECT_EQ(emulate_call<float>(c.spec(), args, 1, 32, false, false), 1);
  for (float v : c.q) EXPECT_EQ(v, 1.0f);
}

TEST(GrapeMCudaEmulation, HeadsWhoseTableWouldNotFitInSharedMemoryComputeTheirOwnAngles) {
  // 64 key heads × 128 planes of per-head rows: 64 KiB of table, over a block's 48 KiB.
  one_token c;
  c.freqs.assign(64 * 128, 0.01);
  cpu::grape_m_spec spec = c.spec();
  spec.head_dim = 256;
  spec.planes = 128;
  spec.freq_rows = 64;
  std::vector<float> k(64 * 256, 1.0f);
  cpu::rotate_qk_args args;
  args.k = {k.data(), k.data(), 64, static_cast<std::int64_t>(k.size()), 0, 64 * 256, 256};
  args.seq_len = 1;
  int flag = 0;
  const cuda::grape_m_host_tables tables = cuda::host_tables_of(spec);
  const cuda::grape_m_launch l = cuda::plan_grape_m_launch(spec, {tables.fractions.data(), tables.turns.data()}, args, 1,
                                                           &flag, false);
  EXPECT_FALSE(l.call.table);
  EXPECT_EQ(l.shared_bytes(), 0);
  EXPECT_EQ(l.block, 256);
}

}  // namespace
}  // namespace grape
