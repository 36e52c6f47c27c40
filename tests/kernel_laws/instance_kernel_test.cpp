// The instance road: every rotate_qk encoding type, built-in or user-defined, goes through the one
// CPU call cpu::rotate_qk(instance, args) with everything that call takes — padded or packed
// varlen tokens, strides with gaps, GQA, int32/int64 position ids or per-sequence offsets, in or
// out of place, f32/f16/bf16 — and its output equals the dense float64 reference exp(Σ c_k L_k)
// through the layout, times the attention factor; its backward is the exact transpose.
// One typed test per encoding (one instantiation each, so compile time stays split).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "cpu/encode_qk.hpp"
#include "dense_reference.hpp"
#include "random_call.hpp"
#include "hour_of_day_rope.hpp"

namespace grape {
namespace {

template <class E, class T>
void instance_agrees_with_reference(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  random_call<E, T> call(rng, E::make(E::random_params(rng)));
  cpu::rotate_qk(call.inst, call.args);
  const double error = call.worst_relative_error();
  RC_LOG() << "seed " << seed << " d " << call.d << " tokens " << call.total << " error " << error << "\n";
  RC_ASSERT(error <= storage_tolerance<T>() * std::sqrt(static_cast<double>(call.d)));
}

/// The backward is the transpose: ⟨g, F(x)⟩ = ⟨Fᵀ(g), x⟩ for the whole call, summed in float64.
template <class E>
void backward_is_transpose(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  random_call<E, float> call(rng, E::make(E::random_params(rng)));
  if (call.args.q.in == call.args.q.out) return;  // needs x kept: out of place only
  random_call<E, float> grad = call;              // same shapes; fresh content is g
  grad.repoint();
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& v : grad.q) v = n(rng);
  for (auto& v : grad.k) v = n(rng);
  cpu::rotate_qk(call.inst, call.args);
  cpu::rotate_qk_backward(call.inst, grad.args);
  double lhs = 0, rhs = 0, scale = 0;
  const auto inner = [&](const std::vector<float>& a, const std::vector<float>& b, const cpu::qk_tensor& o) {
    for (std::int64_t t = 0; t < call.total; ++t)
      for (std::int64_t h = 0; h < o.heads; ++h)
        for (int c = 0; c < call.d; ++c) {
          const std::int64_t i = call.at(o, t, h) + c;
          lhs += static_cast<double>(a[i]) * b[i];
        }
  };
  inner(grad.q, call.q_out, call.args.q);
  inner(grad.k, call.k_out, call.args.k);
  std::swap(lhs, rhs);
  inner(grad.q_out, call.q, call.args.q);
  inner(grad.k_out, call.k, call.args.k);
  for (float v : grad.q) scale += std::abs(v);
  for (float v : grad.k) scale += std::abs(v);
  RC_ASSERT(std::abs(lhs - rhs) <= 1e-5 * scale);
}

template <class E>
class InstanceKernel : public ::testing::Test {};

using rotate_qk_encodings = ::testing::Types<rope, rope_interleaved, mrope, axial_2d, xpos, grape_m,
                                             string_rope, liere_2d, hour_of_day_rope<true>>;
TYPED_TEST_SUITE(InstanceKernel, rotate_qk_encodings);

TYPED_TEST(InstanceKernel, AgreesWithTheDenseReferenceInEveryDtypeAndShape) {
  using E = TypeParam;
  property("f32", 21, 60, instance_agrees_with_reference<E, float>);
  property("f16", 22, 30, instance_agrees_with_reference<E, Eigen::half>);
  property("bf16", 23, 30, instance_agrees_with_reference<E, Eigen::bfloat16>);
}

TYPED_TEST(InstanceKernel, BackwardIsTheTransposeOfTheForward) {
  property("adjoint", 24, 60, backward_is_transpose<TypeParam>);
}

/// The generic body on rotation planes (which normally take the specialised kernels) agrees with
/// the specialised kernel: the two roads compute the same rotation.
TEST(InstanceKernel, GenericBodyOnPlanesMatchesTheSpecialisedKernel) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    random_call<rope, float> a(rng, rope::make(rope::random_params(rng)));
    if (a.args.q.in == a.args.q.out) continue;
    random_call<rope, float> b = a;
    b.repoint();
    const auto spec = kernel_traits<rotation_planes<1>>::plane_spec(a.inst);
    ASSERT_TRUE(spec.has_value());
    cpu::rotate_qk(*spec, a.args);
    cpu::detail::run_instance(b.inst, b.args, false);
    for (std::size_t i = 0; i < a.q_out.size(); ++i) ASSERT_NEAR(a.q_out[i], b.q_out[i], 2e-6f * (1 + std::abs(a.q_out[i])));
    for (std::size_t i = 0; i < a.k_out.size(); ++i) ASSERT_NEAR(a.k_out[i], b.k_out[i], 2e-6f * (1 + std::abs(a.k_out[i])));
  }
}

/// The fused QK-norm and paged KV-cache write on a representation that is not planes: Q and K are
/// RMS-normalised (float64 here), encoded, K lands in its slot (slot −1: skipped), V is copied.
TEST(InstanceKernel, FusedNormAndCacheWriteOnGrapeM) {
  std::mt19937_64 rng(9);
  const auto inst = grape_m::make(grape_m::random_params(rng));
  const int d = inst.content_dim();
  const std::int64_t tokens = 5, hq = 3, hk = 2, block_size = 2, blocks = 4;
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> q(tokens * hq * d), k(tokens * hk * d), v(tokens * hk * d), wq(d), wk(d);
  for (auto* buf : {&q, &k, &v, &wq, &wk})
    for (auto& x : *buf) x = n(rng);
  const std::vector<float> q_in = q;
  std::vector<float> k_cache(blocks * block_size * hk * d, 0.0f), v_cache(k_cache.size(), 0.0f);
  const std::vector<std::int64_t> slots = {6, -1, 0, 3, 5}, pos = {7, 100, 3, 9000, 12};
  cpu::qk_rms_norm norm;
  norm.q_weight = wq.data();
  norm.k_weight = wk.data();
  norm.eps = 1e-5f;
  cpu::kv_cache_write kv;
  kv.slot_mapping = slots.data();
  kv.blocks = blocks;
  kv.block_size = block_size;
  kv.k = {k_cache.data(), static_cast<std::int64_t>(k_cache.size()), block_size * hk * d, hk * d, d};
  kv.v = {v_cache.data(), static_cast<std::int64_t>(v_cache.size()), block_size * hk * d, hk * d, d};
  kv.values = {v.data(), nullptr, hk, static_cast<std::int64_t>(v.size()), 0, hk * d, d};
  cpu::rotate_qk_args args;
  args.q = {q.data(), q.data(), hq, static_cast<std::int64_t>(q.size()), 0, hq * d, d};
  args.k = {k.data(), nullptr, hk, static_cast<std::int64_t>(k.size()), 0, hk * d, d};  // cache only
  args.seq_len = tokens;
  args.position_ids = pos.data();
  args.qk_norm = &norm;
  args.kv_cache = &kv;
  cpu::rotate_qk(inst, args);
  const auto expected = [&](const float* x, const std::vector<float>& w, bool key, std::int64_t t) {
    std::vector<double> h(x, x + d);
    double squares = 0;
    for (double c : h) squares += c * c;
    const double inv_rms = 1.0 / std::sqrt(squares / d + 1e-5);
    for (int c = 0; c < d; ++c) h[c] *= inv_rms * w[c];
    return reference_head<grape_m>(inst, key, {pos[t]}, h);
  };
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t h = 0; h < hq; ++h) {
      const auto ref = expected(q_in.data() + (t * hq + h) * d, wq, false, t);
      for (int c = 0; c < d; ++c) EXPECT_NEAR(q[(t * hq + h) * d + c], ref[c], 2e-5 * (1 + std::abs(ref[c])));
    }
    if (slots[t] < 0) continue;
    for (std::int64_t h = 0; h < hk; ++h) {
      const auto ref = expected(k.data() + (t * hk + h) * d, wk, true, t);
      const std::int64_t at = slots[t] * hk * d + h * d;  // block·block_stride + offset·slot_stride
      for (int c = 0; c < d; ++c) {
        EXPECT_NEAR(k_cache[at + c], ref[c], 2e-5 * (1 + std::abs(ref[c])));
        EXPECT_EQ(v_cache[at + c], v[(t * hk + h) * d + c]);
      }
    }
  }
  // Slot 1, 2, 4 and 7 were not written.
  for (std::int64_t slot : {1, 2, 4, 7})
    for (std::int64_t i = 0; i < hk * d; ++i) EXPECT_EQ(k_cache[slot * hk * d + i], 0.0f) << slot;
}

/// GRAPE-M with generators a and b nearly parallel: the rank-2 closed form in an orthonormal basis
/// of the turning plane stays within a few ulps (the form written in a and b lost (1/sin∠)² ulps:
/// 7e-4 relative at 0.01 rad).
TEST(InstanceKernel, RankTwoIsExactForNearlyParallelGenerators) {
  std::mt19937_64 rng(13);
  std::normal_distribution<double> g(0.0, 1.0);
  for (double angle : {1e-2, 1e-3, 1e-4}) {
    const int d = 16;
    std::vector<double> a(d), w(d);
    for (auto& v : a) v = g(rng);
    for (auto& v : w) v = g(rng);
    double aa = 0, aw = 0, ww = 0;
    for (int i = 0; i < d; ++i) aa += a[i] * a[i], aw += a[i] * w[i];
    for (int i = 0; i < d; ++i) w[i] -= aw / aa * a[i];  // w ⟂ a
    for (int i = 0; i < d; ++i) ww += w[i] * w[i];
    std::vector<double> b(d);
    for (int i = 0; i < d; ++i) b[i] = std::cos(angle) * a[i] / std::sqrt(aa) + std::sin(angle) * w[i] / std::sqrt(ww);
    const auto inst = grape_m::make({d, 0.05 / angle, a, b});  // s ≈ 0.05 rad per position
    std::vector<float> x(d);
    std::vector<double> xd(d);
    for (int i = 0; i < d; ++i) xd[i] = x[i] = static_cast<float>(g(rng));
    for (std::int64_t m : {std::int64_t{1}, std::int64_t{37}, std::int64_t{1000}, std::int64_t{1} << 20}) {
      std::vector<float> y(d);
      inst.rep.apply({m}, x.data(), y.data());
      const Eigen::MatrixXd rho = reference_matrix(inst.rep, std::array<std::int64_t, 1>{m}, false);
      const Eigen::VectorXd ref = rho * Eigen::Map<const Eigen::VectorXd>(xd.data(), d);
      double worst = 0;
      for (int i = 0; i < d; ++i) worst = std::max(worst, std::abs(y[i] - ref[i]));
      EXPECT_LT(worst, 2e-6 * ref.norm()) << "angle " << angle << " position " << m;
    }
  }
}

/// Bad calls through the instance road get the plan's one-line errors, naming the argument.
TEST(InstanceKernel, BadArgumentsAreRefusedByName) {
  const auto inst = grape_m::make(grape_m::default_params());
  std::vector<float> q(64 * 2), k(64);
  std::vector<std::int64_t> pos = {0, 1};
  cpu::rotate_qk_args args;
  args.q = {q.data(), q.data(), 1, 128, 0, 64, 64};
  args.k = {k.data(), k.data(), 1, 64, 0, 64, 64};
  args.seq_len = 2;
  args.position_ids = pos.data();
  const auto expect = [&](cpu::rotate_qk_args bad, const char* names) {
    try {
      cpu::rotate_qk(inst, bad);
      ADD_FAILURE() << "no error naming " << names;
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
  };
  auto a = args;
  a.k.size = 63;
  expect(a, "k.size");
  cpu::rotary_cache cache;
  a = args;
  a.cache = &cache;
  expect(a, "cache");
  a = args;
  a.max_position = 1;
  expect(a, "position_ids[1]");
  auto odd = inst;
  odd.head_dim = 32;  // the window (64) exceeds the head
  try {
    cpu::rotate_qk(odd, args);
    ADD_FAILURE() << "no error for rotary_dim > head_dim";
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find("encoding.rotary_dim exceeds encoding.head_dim"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace grape
