// CPU emulation of the CUDA rotate_qk for encoding instances: encode_token_thread (kernels/cuda)
// runs here over the grid it gets on the device — every block (token) and thread index, both
// phases with the barrier between them, block sizes 1, 7 and 32 — on the plan the CUDA host makes
// (make_instance_plan without reading index arrays), with the view's arrays moved by its
// `relocate` to fresh buffers and the instance they came from destroyed (so a pointer `relocate`
// missed reads freed memory under ASan). It must reproduce cpu::rotate_qk(instance, args), forward
// and backward, for every rotate_qk built-in and the tutorial's own encoding, in f32/f16/bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "../kernel_laws/random_call.hpp"
#include "cpu/encode_qk.hpp"
#include "cuda/encode_qk_thread.hpp"
#include "grape/check/device_emulation.hpp"
#include "hour_of_day_rope.hpp"
#include "cuda/host_storage.hpp"
#include "relocated_view.hpp"

namespace grape {
namespace {

using detail::emulate_view_body;  // the CUDA body over its grid (check/device_emulation.hpp)

template <class T>
void emulation_matches_cpu(std::uint64_t seed, bool backward) {
  std::mt19937_64 rng(seed);
  const auto params = T::encoding::random_params(rng);
  using E = typename T::encoding;
  using S = typename T::storage;
  random_call<E, S> cpu_call(rng, E::make(params));
  random_call<E, S> emulated = cpu_call;
  emulated.repoint();
  // The view from an instance that dies here: only relocated arrays remain.
  const relocated_view view(E::make(params).rep.view());
  using V = decltype(view.view);
  using layouts = layouts_of<typename E::instance>;

  if (backward) cpu::rotate_qk_backward(cpu_call.inst, cpu_call.args);
  else cpu::rotate_qk(cpu_call.inst, cpu_call.args);
  const kernel::device_indices device{emulated.total};
  kernel::rotate_plan p = kernel::make_instance_plan(shape_of(emulated.inst), emulated.args, &device).plan;
  p.sin_sign = backward ? -1.0f : 1.0f;
  const int block = std::array{1, 7, 32}[seed % 3];
  const int flag = emulate_view_body<S, V, layouts::q, layouts::k>(p, view.view, emulated.args.max_position, block);
  RC_ASSERT(flag == 0);
  // The same float32 arithmetic in the same order: equal up to one storage rounding.
  const double tol = storage_tolerance<S>() / 2;
  const auto close = [&](const std::vector<S>& a, const std::vector<S>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
      RC_ASSERT(std::abs(x - y) <= tol * (1 + std::abs(x)));
    }
  };
  close(cpu_call.q_out, emulated.q_out);
  close(cpu_call.k_out, emulated.k_out);
}

template <class E, class S>
struct typed_case {
  using encoding = E;
  using storage = S;
};

template <class E>
class CudaInstanceEmulation : public ::testing::Test {};

using rotate_qk_encodings = ::testing::Types<rope, mrope, xpos, grape_m, string_rope, liere_2d,
                                             hour_of_day_rope<true>>;
TYPED_TEST_SUITE(CudaInstanceEmulation, rotate_qk_encodings);

TYPED_TEST(CudaInstanceEmulation, MatchesTheCpuKernelForwardAndBackward) {
  using E = TypeParam;
  property("f32", 31, 25, [](std::uint64_t s) { emulation_matches_cpu<typed_case<E, float>>(s, false); });
  property("f16", 32, 10, [](std::uint64_t s) { emulation_matches_cpu<typed_case<E, Eigen::half>>(s, false); });
  property("bf16", 33, 10, [](std::uint64_t s) { emulation_matches_cpu<typed_case<E, Eigen::bfloat16>>(s, false); });
  property("backward", 34, 15, [](std::uint64_t s) { emulation_matches_cpu<typed_case<E, float>>(s, true); });
}

/// A position outside [0, max_position) sets the flag and leaves its token untouched.
TEST(CudaInstanceEmulation, BadPositionSetsTheFlagAndLeavesTheTokenUntouched) {
  std::mt19937_64 rng(3);
  const auto inst = grape_m::make(grape_m::random_params(rng));
  const int d = inst.content_dim();
  std::vector<float> q(2 * d, 1.0f), k(2 * d, 1.0f);
  const std::vector<std::int64_t> pos = {5, 100};
  cpu::rotate_qk_args args;
  args.q = {q.data(), q.data(), 1, 2 * d, 0, d, d};
  args.k = {k.data(), k.data(), 1, 2 * d, 0, d, d};
  args.seq_len = 2;
  args.position_ids = pos.data();
  args.max_position = 50;  // position 100 is out of range: the device plan does not read it
  const kernel::device_indices device{2};
  const auto p = kernel::make_instance_plan(shape_of(inst), args, &device).plan;
  const relocated_view view(inst.rep.view());
  EXPECT_EQ((emulate_view_body<float, decltype(view.view), layout_kind::half_split, layout_kind::half_split>(p, view.view, 50, 7)), 1);
  for (int c = 0; c < d; ++c) {
    EXPECT_EQ(q[d + c], 1.0f);
    EXPECT_EQ(k[d + c], 1.0f);
  }
  EXPECT_TRUE(std::any_of(q.begin(), q.begin() + d, [](float v) { return v != 1.0f; }));  // token 0 encoded
}

}  // namespace
}  // namespace grape
