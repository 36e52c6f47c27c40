// GRAPE-A's own Q/K kernel: cpu::lift_qk(grape_a instance, args, q_lifted, k_lifted) with
// everything rotate_qk's arguments carry (padded or varlen tokens, strides with gaps, GQA, ids or
// offsets, f32/f16/bf16). Each lifted head equals the dense float64 (I + m·A)·[q; 1; 0] (keys
// (I − n·Aᵀ)·[k; 0; 1]; A = u vᵀ, A² = 0), for ALiBi's lift and for random nilpotent lifts that move the content
// channels too; the lifted scores are ALiBi's, qᵀk + slope_h·(n − m) with slope_h =
// 2^(−8(h+1)/H) written out here; the backward is the transpose of the forward's linear part.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <random>
#include <vector>

#include "cpu/lift_qk.hpp"
#include "dense_reference.hpp"
#include "grape/detail/error.hpp"
#include "lift_call.hpp"
#include "random_call.hpp"

namespace grape {
namespace {

template <class T>
void lifted_heads_match_the_dense_reference(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  lift_call<T> call(rng, std::is_same_v<T, float> ? std::int64_t{1} << 20 : 256, /*general=*/seed % 2 == 1);
  cpu::lift_qk(call.inst, call.args, call.ql, call.kl);
  const int d = call.d, w = d + 2;
  const std::int64_t group = call.q_heads / call.k_heads;
  double worst = 0;
  for (std::int64_t token = 0; token < call.total; ++token)
    for (std::int64_t h = 0; h < call.q_heads; ++h)
      for (const bool key : {false, true}) {
        const auto& src = key ? call.k : call.q;
        const std::int64_t in_at = key ? call.at(call.args.k, token, h / group) : call.at(call.args.q, token, h);
        Eigen::VectorXd x = Eigen::VectorXd::Zero(w);
        for (int c = 0; c < d; ++c) x[c] = static_cast<double>(src[in_at + c]);
        x[key ? d + 1 : d] = 1.0;
        // exp(tA) = I + tA exactly (A = u vᵀ, A² = 0), formed densely in float64; keys take the
        // inverse transpose I − tAᵀ. (Eigen's matrix exponential loses digits here: scaling and
        // squaring a matrix of norm 2^20.)
        const double t = static_cast<double>(call.positions[token]);
        const Eigen::MatrixXd A = call.inst.reps[h].generator(0);
        const Eigen::MatrixXd acting = key ? Eigen::MatrixXd(-A.transpose()) : A;
        const Eigen::VectorXd ref = x + t * (acting * x);
        const auto& out = key ? call.k_lifted : call.q_lifted;
        const std::int64_t out_at = call.at(key ? call.kl : call.ql, token, h);
        // The size of the terms summed (|x| + |t|·|A||x|): float32 is accurate relative to them,
        // not to the result, when vᵀx nearly cancels (random lifts).
        const double scale =
            std::max(1.0, (x.cwiseAbs() + std::abs(t) * (acting.cwiseAbs() * x.cwiseAbs())).maxCoeff());
        for (int j = 0; j < w; ++j)
          worst = std::max(worst, std::abs(static_cast<double>(out[out_at + j]) - ref[j]) / scale);
      }
  RC_LOG() << "seed " << seed << " d " << d << " tokens " << call.total << " worst " << worst << "\n";
  RC_ASSERT(worst <= storage_tolerance<T>());
}

TEST(LiftQk, LiftedHeadsMatchTheDenseReferenceInEveryDtypeAndShape) {
  property("f32", 41, 80, lifted_heads_match_the_dense_reference<float>);
  property("f16", 42, 40, lifted_heads_match_the_dense_reference<Eigen::half>);
  property("bf16", 43, 40, lifted_heads_match_the_dense_reference<Eigen::bfloat16>);
}

/// q̃_h(m)ᵀ k̃_h(n) = qᵀk + slope_h·(n − m), the slope from ALiBi's rule, for every query/key pair.
void lifted_scores_are_alibi(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  lift_call<float> call(rng, std::int64_t{1} << 20);
  cpu::lift_qk(call.inst, call.args, call.ql, call.kl);
  const int d = call.d;
  const std::int64_t group = call.q_heads / call.k_heads;
  for (std::int64_t h = 0; h < call.q_heads; ++h) {
    const double slope = std::pow(2.0, -8.0 * static_cast<double>(h + 1) / static_cast<double>(call.q_heads));
    for (std::int64_t i = 0; i < call.total; ++i)
      for (std::int64_t j = 0; j < call.total; ++j) {
        const std::int64_t qa = call.at(call.args.q, i, h), ka = call.at(call.args.k, j, h / group);
        const std::int64_t qla = call.at(call.ql, i, h), kla = call.at(call.kl, j, h);
        double lifted = 0, content = 0, size = 0;
        for (int c = 0; c < d + 2; ++c) {
          lifted += static_cast<double>(call.q_lifted[qla + c]) * call.k_lifted[kla + c];
          size += std::abs(static_cast<double>(call.q_lifted[qla + c]) * call.k_lifted[kla + c]);
        }
        for (int c = 0; c < d; ++c) content += static_cast<double>(call.q[qa + c]) * call.k[ka + c];
        const double want = content + slope * static_cast<double>(call.positions[j] - call.positions[i]);
        RC_ASSERT(std::abs(lifted - want) <= 4e-7 * (size + 1.0));
      }
  }
}

TEST(LiftQk, LiftedScoresAreAlibiWithItsSlopeRule) { property("scores", 44, 60, lifted_scores_are_alibi); }

/// ⟨g, L(x) − L(0)⟩ = ⟨Lᵀg, x⟩ over the whole call (L affine: its constant part is L(0)), float64 sums.
void backward_is_the_transpose(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool general = seed % 4 != 0;  // ALiBi's lift leaves the content channels as they are
  lift_call<float> call(rng, std::int64_t{1} << 16, general);
  std::mt19937_64 same(seed);
  lift_call<float> zero(same, std::int64_t{1} << 16, general);  // the same call with content 0
  std::fill(zero.q.begin(), zero.q.end(), 0.0f);
  std::fill(zero.k.begin(), zero.k.end(), 0.0f);
  cpu::lift_qk(call.inst, call.args, call.ql, call.kl);
  cpu::lift_qk(zero.inst, zero.args, zero.ql, zero.kl);
  // The gradient call: the forward's shapes and positions, g in the lifted buffers.
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> gq(call.q_lifted.size()), gk(call.k_lifted.size()), dq(call.q.size(), 0.0f), dk(call.k.size(), 0.0f);
  for (auto& v : gq) v = n(rng);
  for (auto& v : gk) v = n(rng);
  cpu::rotate_qk_args back = call.args;
  back.q.in = back.k.in = nullptr;
  back.q.out = dq.data();
  back.k.out = dk.data();
  cpu::lifted_tensor gql = call.ql, gkl = call.kl;
  gql.data = gq.data();
  gkl.data = gk.data();
  cpu::lift_qk_backward(call.inst, back, gql, gkl);
  double lhs = 0, rhs = 0, scale = 0;
  for (std::int64_t t = 0; t < call.total; ++t) {
    for (std::int64_t h = 0; h < call.q_heads; ++h)
      for (int c = 0; c < call.d + 2; ++c) {
        const std::int64_t a = call.at(call.ql, t, h) + c, b = call.at(call.kl, t, h) + c;
        lhs += static_cast<double>(gq[a]) * (call.q_lifted[a] - zero.q_lifted[a]);
        lhs += static_cast<double>(gk[b]) * (call.k_lifted[b] - zero.k_lifted[b]);
        scale += std::abs(gq[a] * call.q_lifted[a]) + std::abs(gk[b] * call.k_lifted[b]);
      }
    for (std::int64_t h = 0; h < call.q_heads; ++h)
      for (int c = 0; c < call.d; ++c) rhs += static_cast<double>(dq[call.at(call.args.q, t, h) + c]) * call.q[call.at(call.args.q, t, h) + c];
    for (std::int64_t h = 0; h < call.k_heads; ++h)
      for (int c = 0; c < call.d; ++c) rhs += static_cast<double>(dk[call.at(call.args.k, t, h) + c]) * call.k[call.at(call.args.k, t, h) + c];
  }
  RC_ASSERT(std::abs(lhs - rhs) <= 1e-5 * (scale + 1.0));
}

TEST(LiftQk, BackwardIsTheTransposeOfTheForward) { property("backward", 45, 60, backward_is_the_transpose); }

/// One input_error naming the argument, and no write (on a call with tokens and GQA).
template <class Mutate>
void expect_error(Mutate mutate, const std::string& names, bool backward = false) {
  std::unique_ptr<lift_call<float>> call;
  for (std::uint64_t seed = 7;; ++seed) {
    std::mt19937_64 rng(seed);
    call = std::make_unique<lift_call<float>>(rng, 1000);
    if (call->total > 0 && call->k_heads < call->q_heads) break;
  }
  lift_call<float>& c = *call;
  mutate(c);
  const auto before = std::make_tuple(c.q, c.k, c.q_lifted, c.k_lifted);
  try {
    if (backward) cpu::lift_qk_backward(c.inst, c.args, c.ql, c.kl);
    else cpu::lift_qk(c.inst, c.args, c.ql, c.kl);
    ADD_FAILURE() << "no error; expected one naming " << names;
  } catch (const input_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("grape: ", 0), 0u) << what;
    EXPECT_NE(what.find(names), std::string::npos) << what << " (expected to name " << names << ")";
  }
  EXPECT_TRUE(before == std::make_tuple(c.q, c.k, c.q_lifted, c.k_lifted)) << "a buffer was written";
}

TEST(LiftQk, BadArgumentsNameTheArgumentAndWriteNothing) {
  using C = lift_call<float>;
  expect_error([](C& c) { c.args.q.heads /= 2; }, "q.heads");
  expect_error([](C& c) { c.args.k.heads = c.args.q.heads * 2; }, "k.heads");
  expect_error([](C& c) { c.args.q.out = c.q.data(); }, "q.out must be null");
  expect_error([](C& c) { c.ql.size = 1; }, "q_lifted.size");
  expect_error([](C& c) { c.kl.head_stride = 1; }, "k_lifted");
  expect_error([](C& c) { c.kl = c.ql; }, "q_lifted overlaps k_lifted");
  expect_error([](C& c) { c.kl.data = c.k.data(), c.kl.size = static_cast<std::int64_t>(c.k.size()); }, "k_lifted");
  expect_error([](C& c) { c.ql.data = nullptr; }, "q_lifted.data");
  const cpu::qk_rms_norm norm{};
  expect_error([&](C& c) { c.args.qk_norm = &norm; }, "qk_norm");
  expect_error([](C& c) { c.args.max_position = 0; }, "max_position");
  expect_error([](C& c) { c.args.type = cpu::dtype::f16, c.args.max_position = std::int64_t{1} << 30; }, "type: f16");
  expect_error([](C& c) { c.args.q.in = nullptr, c.args.q.out = c.q.data(), c.args.k.out = c.k.data(); },
               "k.in must be null", /*backward=*/true);
  expect_error([](C& c) { c.inst.head_dim += 2; }, "head_dim + 2");
}

}  // namespace
}  // namespace grape
