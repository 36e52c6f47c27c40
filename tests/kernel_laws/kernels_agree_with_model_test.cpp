// The law "the kernel agrees with the model": for every rotary built-in, dtype and layout, the CPU
// kernels' output equals the dense float64 reference exp(Σ c_k L_k), mapped through the layout,
// times the attention factor. Random parameters, content, positions up to 2^20, token counts that
// are not multiples of a vector width and odd head counts (rapidcheck properties).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <Eigen/Core>
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "cpu/encoding_kernel.hpp"
#include "cpu/rotate_qk.hpp"
#include "grape/builtins.hpp"
#include "grape/check/reference.hpp"
#include "grape/encodings/rotary_table.hpp"

namespace grape {
namespace {

template <class T>
constexpr double storage_tolerance() {
  if constexpr (std::is_same_v<T, float>) return 4e-6;
  else if constexpr (std::is_same_v<T, Eigen::half>) return 2e-3;
  else return 1.6e-2;
}

template <class T>
constexpr cpu::dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>) return cpu::dtype::f32;
  else if constexpr (std::is_same_v<T, Eigen::half>) return cpu::dtype::f16;
  else return cpu::dtype::bf16;
}

template <class I>
struct layouts_of;
template <class R, layout_kind Q, layout_kind K>
struct layouts_of<rotate_instance<R, Q, K>> {
  static constexpr layout_kind q = Q, k = K;
};

/// Reference output of one head: y[ch(j)] = af·Σ_l ρ(j, l)·x[ch(l)] inside the rotary window.
template <class E>
std::vector<double> reference_head(const typename E::instance& inst, bool is_key,
                                   const std::array<std::int64_t, E::group::rank>& c, const std::vector<double>& x) {
  using layouts = layouts_of<typename E::instance>;
  const layout_kind layout = is_key ? layouts::k : layouts::q;
  const int d = inst.rotary_dim();
  const Eigen::MatrixXd rho = reference_matrix(inst.rep, c, is_key);
  std::vector<double> y(x);
  for (int j = 0; j < d; ++j) {
    double s = 0;
    for (int l = 0; l < d; ++l) s += rho(j, l) * x[inst.channel_of(layout, l, d)];
    y[inst.channel_of(layout, j, d)] = inst.attention_factor * s;
  }
  return y;
}

/// The generic kernel against the reference, for one encoding and storage type.
template <class E, class T>
void generic_kernel_agrees() {
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  const auto tokens = *rc::gen::inRange<std::int64_t>(1, 19);
  const auto heads = *rc::gen::inRange<std::int64_t>(1, 6);
  const bool is_key = *rc::gen::arbitrary<bool>();
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  const int d = inst.content_dim();
  std::vector<std::array<std::int64_t, E::group::rank>> coords(tokens);
  std::uniform_int_distribution<std::int64_t> pos(0, E::position_limit - 1);
  for (auto& c : coords)
    for (auto& v : c) v = pos(rng);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<T> x(tokens * heads * d), y(x.size());
  for (auto& v : x) v = static_cast<T>(g(rng));
  cpu::apply_encoding<E, T>(inst, is_key, x.data(), y.data(), tokens, heads, coords.data());
  double worst = 0, scale = 1;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      std::vector<double> xh(d);
      for (int c = 0; c < d; ++c) xh[c] = static_cast<double>(x[(t * heads + h) * d + c]);
      const auto ref = reference_head<E>(inst, is_key, coords[t], xh);
      for (int c = 0; c < d; ++c) {
        worst = std::max(worst, std::abs(static_cast<double>(y[(t * heads + h) * d + c]) - ref[c]));
        scale = std::max(scale, std::abs(ref[c]));
      }
    }
  RC_ASSERT(worst <= storage_tolerance<T>() * scale * std::sqrt(static_cast<double>(d)));
}

constexpr auto rotary_builtins = boost::hana::tuple_t<rope, rope_interleaved, mrope, axial_2d, xpos, grape_m,
                                                      string_rope, liere_2d>;

TEST(KernelLaw, GenericKernelAgreesWithTheDenseReferenceForEveryRotaryBuiltinAndDtype) {
  boost::hana::for_each(rotary_builtins, [](auto t) {
    using E = typename decltype(t)::type;
    for (int which = 0; which < 3; ++which) {
      rc::detail::TestParams params;
      params.seed = 11;
      params.maxSuccess = 40;
      const auto body = [which] {
        if (which == 0) generic_kernel_agrees<E, float>();
        else if (which == 1) generic_kernel_agrees<E, Eigen::half>();
        else generic_kernel_agrees<E, Eigen::bfloat16>();
      };
      const auto result = rc::detail::checkProperty(rc::detail::toProperty(body), rc::detail::TestMetadata{}, params);
      EXPECT_TRUE(result.template is<rc::detail::SuccessResult>()) << E::name << " dtype " << which;
    }
  });
}

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
