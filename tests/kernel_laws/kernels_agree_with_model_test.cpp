// The law "the kernel agrees with the model" for the rotary_spec road (a model's table): the
// specialised plane kernels equal the dense float64 reference exp(Σ c_k L_k), mapped through the
// layout, times the attention factor. Random schedules, positions up to 2^20, token counts that
// are not multiples of a vector width and odd head counts (rapidcheck properties). The instance
// road (every built-in type) is instance_kernel_test.cpp.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <Eigen/Core>
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "dense_reference.hpp"
#include "grape/encodings/rotary_table.hpp"

namespace grape {
namespace {

/// The specialised rotation-plane kernel (both paths) against the same reference, through a
/// model-style rotary table: random schedules, partial rotary dims, attention factors, GQA.
template <layout_kind L, class T>
void plane_kernel_agrees(bool cached) {
  using E = rotary_table<L>;
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  const auto tokens = *rc::gen::inRange<std::int64_t>(1, 37);
  const auto q_heads = *rc::gen::inRange<std::int64_t>(1, 7);
  const auto k_heads = *rc::gen::inRange<std::int64_t>(1, 3);
  std::mt19937_64 rng(seed);
  const rotary_spec spec = rotary_table<L>::random_params(rng);
  const auto inst = rotary_table<L>::make(spec);
  const int d = spec.head_dim;
  const std::int64_t max_position = cached ? 4096 : std::int64_t{1} << 20;
  std::uniform_int_distribution<std::int64_t> pos(0, max_position - 1);
  std::vector<std::int64_t> positions(tokens);
  for (auto& p : positions) p = pos(rng);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<T> q(tokens * q_heads * d), k(tokens * k_heads * d);
  for (auto& v : q) v = static_cast<T>(g(rng));
  for (auto& v : k) v = static_cast<T>(g(rng));
  std::vector<T> q_out(q.size()), k_out(k.size());
  cpu::rotate_qk_args args;
  args.type = dtype_of<T>();
  args.q = {q.data(), q_out.data(), q_heads, static_cast<std::int64_t>(q.size()), 0, q_heads * d, d};
  args.k = {k.data(), k_out.data(), k_heads, static_cast<std::int64_t>(k.size()), 0, k_heads * d, d};
  args.seq_len = tokens;
  args.position_ids = positions.data();
  cpu::rotary_cache cache;
  if (cached) {
    cache = cpu::rotary_cache::build(spec, max_position);
    args.cache = &cache;
  }
  cpu::rotate_qk(spec, args);
  double worst = 0, scale = 1;
  auto compare = [&](const std::vector<T>& in, const std::vector<T>& out, std::int64_t heads, bool is_key) {
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h) {
        std::vector<double> xh(d);
        for (int c = 0; c < d; ++c) xh[c] = static_cast<double>(in[(t * heads + h) * d + c]);
        const auto ref = reference_head<E>(inst, is_key, {positions[t]}, xh);
        for (int c = 0; c < d; ++c) {
          worst = std::max(worst, std::abs(static_cast<double>(out[(t * heads + h) * d + c]) - ref[c]));
          scale = std::max(scale, std::abs(ref[c]));
        }
      }
  };
  compare(q, q_out, q_heads, false);
  compare(k, k_out, k_heads, true);
  RC_ASSERT(worst <= storage_tolerance<T>() * scale * std::sqrt(static_cast<double>(d)));
}

RC_GTEST_PROP(KernelLaw, RotationPlaneKernelHalfSplitF32, ()) { plane_kernel_agrees<layout_kind::half_split, float>(false); }
RC_GTEST_PROP(KernelLaw, RotationPlaneKernelInterleavedF32, ()) { plane_kernel_agrees<layout_kind::interleaved, float>(false); }
RC_GTEST_PROP(KernelLaw, RotationPlaneKernelHalfSplitF32Cached, ()) { plane_kernel_agrees<layout_kind::half_split, float>(true); }
RC_GTEST_PROP(KernelLaw, RotationPlaneKernelInterleavedF32Cached, ()) { plane_kernel_agrees<layout_kind::interleaved, float>(true); }
RC_GTEST_PROP(KernelLaw, RotationPlaneKernelHalfSplitF16, ()) { plane_kernel_agrees<layout_kind::half_split, Eigen::half>(false); }
RC_GTEST_PROP(KernelLaw, RotationPlaneKernelInterleavedBf16, ()) { plane_kernel_agrees<layout_kind::interleaved, Eigen::bfloat16>(false); }
RC_GTEST_PROP(KernelLaw, RotationPlaneKernelHalfSplitBf16Cached, ()) { plane_kernel_agrees<layout_kind::half_split, Eigen::bfloat16>(true); }

}  // namespace
}  // namespace grape
