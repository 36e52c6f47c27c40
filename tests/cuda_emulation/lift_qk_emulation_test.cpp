// CPU emulation of the CUDA lift_qk (GRAPE-A): lift_token_thread (kernels/cuda/lift_qk_thread.hpp)
// runs here over the grid it gets on the device — every block (token) and thread index, both
// phases, block sizes 1, 7 and 32 — on the plan the CUDA host makes (make_lift_plan without
// reading index arrays), with every head's view relocated and the instance destroyed. It must
// reproduce cpu::lift_qk, forward and backward, in f32/f16/bf16, for ALiBi's lift and random
// nilpotent ones; a bad position sets the flag.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "../kernel_laws/lift_call.hpp"
#include "../kernel_laws/random_call.hpp"
#include "cpu/lift_qk.hpp"
#include "cuda/lift_qk_thread.hpp"
#include "cuda/host_storage.hpp"
#include "relocated_view.hpp"

namespace grape {
namespace {

using lift_view_type = decltype(std::declval<const unipotent_lift&>().view());

/// Every head's view, relocated (as device_lift uploads them), from a copy of the instance that
/// dies here.
struct relocated_lift {
  std::vector<std::unique_ptr<relocated_view<lift_view_type>>> heads;
  std::vector<lift_view_type> views;
  explicit relocated_lift(grape_a::instance inst) {
    for (const auto& rep : inst.reps) {
      heads.push_back(std::make_unique<relocated_view<lift_view_type>>(rep.view()));
      views.push_back(heads.back()->view);
    }
  }
};

/// Runs the CUDA body over grid = tokens, `block` threads per block; returns the error flag.
template <class T>
int emulate(const kernel::lift_plan& lp, const relocated_lift& lift, std::int64_t max_position, int block) {
  int flag = 0;
  const int per_thread = cuda::lift_thread_floats(lp.plan.head_dim, lift.views.front());
  const cuda::lift_token_thread<T, lift_view_type> f{lp, lift.views.data(), per_thread, max_position, &flag};
  std::vector<float> smem(static_cast<std::size_t>(block) * per_thread);
  for (std::int64_t token = 0; token < lp.plan.total_tokens; ++token) {
    for (int tid = 0; tid < block; ++tid) f.fill_table(token, tid, block, smem.data());
    for (int tid = 0; tid < block; ++tid) f.rotate(token, tid, block, smem.data());
  }
  return flag;
}

template <class T>
void emulation_matches_cpu(std::uint64_t seed, bool backward) {
  std::mt19937_64 rng(seed), same(seed);
  const std::int64_t limit = std::is_same_v<T, float> ? std::int64_t{1} << 20 : 256;
  const bool general = seed % 2 == 1;
  lift_call<T> cpu_call(rng, limit, general);
  lift_call<T> emulated(same, limit, general);
  const relocated_lift lift(emulated.inst);
  const int block = std::array{1, 7, 32}[seed % 3];
  const kernel::device_indices device{emulated.total};
  if (backward) {
    // Gradients in the lifted buffers; dQ and dK written to the content buffers.
    for (lift_call<T>* c : {&cpu_call, &emulated}) {
      std::mt19937_64 g(seed + 1);
      std::normal_distribution<double> n(0.0, 1.0);
      for (auto& v : c->q_lifted) v = static_cast<T>(n(g));
      for (auto& v : c->k_lifted) v = static_cast<T>(n(g));
      c->args.q.out = const_cast<void*>(c->args.q.in);
      c->args.k.out = const_cast<void*>(c->args.k.in);
      c->args.q.in = c->args.k.in = nullptr;
    }
    cpu::lift_qk_backward(cpu_call.inst, cpu_call.args, cpu_call.ql, cpu_call.kl);
  } else {
    cpu::lift_qk(cpu_call.inst, cpu_call.args, cpu_call.ql, cpu_call.kl);
  }
  const auto lp = kernel::make_lift_plan({emulated.d, emulated.d + 2, emulated.q_heads, 1}, emulated.args,
                                              emulated.ql, emulated.kl, backward, &device);
  RC_ASSERT(emulate<T>(lp, lift, emulated.args.max_position, block) == 0);
  // The same float32 arithmetic in the same order: equal up to one storage rounding.
  const double tol = storage_tolerance<T>() / 2;
  const auto close = [&](const std::vector<T>& a, const std::vector<T>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
      RC_ASSERT(std::abs(x - y) <= tol * (1 + std::abs(x)));
    }
  };
  close(cpu_call.q_lifted, emulated.q_lifted);
  close(cpu_call.k_lifted, emulated.k_lifted);
  close(cpu_call.q, emulated.q);
  close(cpu_call.k, emulated.k);
}

TEST(CudaLiftEmulation, MatchesTheCpuKernelForwardAndBackward) {
  property("f32", 51, 40, [](std::uint64_t s) { emulation_matches_cpu<float>(s, false); });
  property("f16", 52, 20, [](std::uint64_t s) { emulation_matches_cpu<Eigen::half>(s, false); });
  property("bf16", 53, 20, [](std::uint64_t s) { emulation_matches_cpu<Eigen::bfloat16>(s, false); });
  property("backward f32", 54, 30, [](std::uint64_t s) { emulation_matches_cpu<float>(s, true); });
  property("backward bf16", 55, 15, [](std::uint64_t s) { emulation_matches_cpu<Eigen::bfloat16>(s, true); });
}

/// A position outside [0, max_position) sets the flag and leaves its token's lifted heads unwritten.
TEST(CudaLiftEmulation, BadPositionSetsTheFlagAndLeavesTheTokenUnwritten) {
  const grape_a::params params{2, 4, 8.0};
  const int d = 4, w = d + 2;
  std::vector<float> q(2 * 2 * d, 1.0f), k(2 * d, 1.0f), ql(2 * 2 * w, 7.0f), kl(2 * 2 * w, 7.0f);
  const std::vector<std::int64_t> pos = {5, 100};
  cpu::rotate_qk_args args;
  args.q = {q.data(), nullptr, 2, 2 * 2 * d, 0, 2 * d, d};
  args.k = {k.data(), nullptr, 1, 2 * d, 0, d, d};
  args.seq_len = 2;
  args.position_ids = pos.data();
  args.max_position = 50;  // position 100 is out of range: the device plan does not read it
  const cpu::lifted_tensor q_lifted{ql.data(), 2 * 2 * w, 0, 2 * w, w}, k_lifted{kl.data(), 2 * 2 * w, 0, 2 * w, w};
  const kernel::device_indices device{2};
  const auto lp = kernel::make_lift_plan({d, w, 2, 1}, args, q_lifted, k_lifted, false, &device);
  const relocated_lift lift(grape_a::make(params));
  EXPECT_EQ(emulate<float>(lp, lift, 50, 7), 1);
  for (int c = 0; c < 2 * w; ++c) {
    EXPECT_EQ(ql[2 * w + c], 7.0f);
    EXPECT_EQ(kl[2 * w + c], 7.0f);
  }
  EXPECT_EQ(ql[d], 1.0f);  // token 0 lifted: [q; 1; −slope·5]
  EXPECT_FLOAT_EQ(ql[d + 1], static_cast<float>(-0.0625 * 5));  // slope 2^(−8/2)
}

}  // namespace
}  // namespace grape
