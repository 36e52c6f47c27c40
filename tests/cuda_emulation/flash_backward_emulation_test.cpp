// CPU emulation of the CUDA flash attention's backward (kernels/cuda/flash_backward_program.hpp):
// the emulated forward gives O and the log-sum-exp, then the key programs and the query programs
// run over the grids a launch gets, and dL/dQ, dL/dK, dL/dV must match the float64 dense formulas
// on the same rounded inputs (flash_case.hpp) for every bias, storage type, mask and shape; run
// again with every phase in reverse thread order, the same bits.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "flash_case.hpp"

namespace grape {
namespace {

using namespace flash_test;

template <class T>
double grad_tolerance() {
  if constexpr (std::is_same_v<T, float>) return 2e-5;
  else if constexpr (std::is_same_v<T, Eigen::half>) return 3e-3;
  else return 2e-2;  // P and dS rounded to bfloat16 before the products
}

/// The largest difference relative to the largest reference entry, or to the largest sum of term
/// sizes (terms, when given) where the terms cancel to a smaller result.
template <class T>
double relative_error(const std::vector<T>& got, const std::vector<double>& want,
                      const std::vector<double>& terms = {}) {
  double worst = 0, scale = 1e-30;
  for (std::size_t e = 0; e < want.size(); ++e) {
    worst = std::max(worst, std::abs(static_cast<double>(cuda::storage<T>::load(got[e])) - want[e]));
    scale = std::max({scale, std::abs(want[e]), terms.empty() ? 0.0 : terms[e]});
  }
  return worst / scale;
}

template <class T>
std::string run_backward(const scenario& s, std::uint64_t seed, const std::string& what) {
  const flash_case<T> c(s, seed);
  std::mt19937_64 rng(seed + 99);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<T> dout(c.tokens * s.q_heads * s.v_dim);
  for (auto& x : dout) x = static_cast<T>(n(rng));
  std::vector<double> want_dq, want_dk, want_dv, dq_terms, dk_terms;
  c.reference_grads(dout, want_dq, want_dk, want_dv, dq_terms, dk_terms);

  std::vector<T> out(c.tokens * s.q_heads * s.v_dim);
  std::vector<float> lse(c.tokens * s.q_heads);
  int error = 0;
  cuda::flash_args ops = c.operands(out, lse, &error);
  const auto forward_smem = cuda::flash_smem_of(kernel::element_bytes(ops.type), s.rows, s.rows, s.head_dim, s.v_dim);
  const auto backward_smem = cuda::flash_backward_smem_of(kernel::element_bytes(ops.type), s.rows, s.head_dim, s.v_dim);
  const cuda::flash_plan forward_plan{s.rows, s.rows, 2 * s.rows, forward_smem.bytes};
  const cuda::flash_plan plan{s.rows, s.rows, 2 * s.rows, backward_smem.bytes};
  with_scores(c, [&](const auto& bias) { emulate<T>(ops, forward_plan, bias); });

  std::vector<std::vector<T>> dq(2, std::vector<T>(want_dq.size())), dk(2, std::vector<T>(want_dk.size())),
      dv(2, std::vector<T>(want_dv.size()));
  for (int reverse = 0; reverse < 2; ++reverse) {
    cuda::emulate_in_reverse() = reverse == 1;
    const cuda::flash_grads g{dout.data(), dq[reverse].data(), dk[reverse].data(), dv[reverse].data()};
    with_scores(c, [&](const auto& bias) { emulate_backward<T>(ops, g, plan, bias); });
  }
  cuda::emulate_in_reverse() = false;
  if (error != 0) return what + ": the error flag is set";
  for (int t = 0; t < 3; ++t) {
    const auto& pair = t == 0 ? dq : t == 1 ? dk : dv;
    for (std::size_t e = 0; e < pair[0].size(); ++e)
      if (cuda::storage<T>::load(pair[0][e]) != cuda::storage<T>::load(pair[1][e]))
        return what + ": " + "QKV"[t] + " gradient " + std::to_string(e) + " differs in reverse order";
  }
  const double eq = relative_error(dq[0], want_dq, dq_terms), ek = relative_error(dk[0], want_dk, dk_terms),
               ev = relative_error(dv[0], want_dv);
  if (!(eq < grad_tolerance<T>() && ek < grad_tolerance<T>() && ev < grad_tolerance<T>()))
    return what + ": relative errors dQ " + std::to_string(eq) + ", dK " + std::to_string(ek) + ", dV " +
           std::to_string(ev);
  return "";
}

TEST(FlashBackwardEmulation, MatchesTheDenseGradientsForEveryBiasAndStorageType) {
  for (bias_kind bias :
       {bias_kind::none, bias_kind::alibi, bias_kind::t5, bias_kind::fox, bias_kind::gated_key, bias_kind::gated_qk}) {
    scenario s;
    s.bias = bias;
    s.lengths = {150};
    s.q_heads = 4;
    s.k_heads = s.v_heads = 2;
    const std::string what = "bias " + std::to_string(static_cast<int>(bias));
    EXPECT_EQ(run_backward<float>(s, 1, what + " f32"), "");
    EXPECT_EQ(run_backward<Eigen::half>(s, 2, what + " f16"), "");
    EXPECT_EQ(run_backward<Eigen::bfloat16>(s, 3, what + " bf16"), "");
  }
}

TEST(FlashBackwardEmulation, MasksSequencesAndTiles) {
  for (int tile : {16, 32, 64}) {
    scenario s;
    s.rows = tile;
    s.causal = false;
    s.window = 11;
    s.lengths = {90};
    EXPECT_EQ(run_backward<float>(s, 4, "two-sided window, tile " + std::to_string(tile)), "");
    s.causal = true;
    s.window = 0;
    s.varlen = true;
    s.positions = true;
    s.lengths = {1, 0, 77, 40};
    s.bias = bias_kind::alibi;
    EXPECT_EQ(run_backward<float>(s, 5, "packed, positions, tile " + std::to_string(tile)), "");
    s.head_dim = 16;
    s.v_dim = 48;
    s.q_token_pad = 3;
    EXPECT_EQ(run_backward<Eigen::half>(s, 6, "v_dim 48, strided Q, tile " + std::to_string(tile)), "");
  }
}

TEST(FlashBackwardEmulation, PlansAndChecks) {
  cuda::flash_args ops;
  ops.type = kernel::dtype::bf16;
  for (int d : {64, 128, 256}) {
    ops.head_dim = ops.v_dim = d;
    const cuda::flash_plan p = cuda::plan_flash_backward(ops, 99 * 1024);
    ASSERT_GT(p.rows, 0) << d;
    EXPECT_LE(p.smem_bytes, 99 * 1024);
  }
  scenario s;
  s.k_heads = 2;
  s.v_heads = 1;
  flash_case<float> c(s, 7);
  std::vector<float> out(c.tokens * s.q_heads * s.v_dim), lse(c.tokens * s.q_heads), grad(out.size());
  int error = 0;
  const cuda::flash_args bad = c.operands(out, lse, &error);
  const cuda::flash_grads g{grad.data(), grad.data(), grad.data(), grad.data()};
  EXPECT_THROW(cuda::check_flash_backward(bad, g), input_error);
  scenario ok;
  flash_case<float> c2(ok, 8);
  cuda::flash_args ops2 = c2.operands(out, lse, &error);
  ops2.lse = nullptr;
  EXPECT_THROW(cuda::check_flash_backward(ops2, g), input_error);
}

RC_GTEST_PROP(FlashBackwardEmulation, RandomScenariosMatchTheDenseGradients, ()) {
  scenario s;
  s.k_heads = s.v_heads = *rc::gen::element(1, 2);
  s.q_heads = s.k_heads * *rc::gen::inRange(1, 3);
  s.head_dim = 16 * *rc::gen::inRange(1, 3);
  s.v_dim = 16 * *rc::gen::inRange(1, 3);
  s.varlen = *rc::gen::arbitrary<bool>();
  const int batch = *rc::gen::inRange(1, 3);
  s.lengths.clear();
  for (int b = 0; b < batch; ++b) s.lengths.push_back(*rc::gen::inRange(0, 70));
  if (!s.varlen && s.lengths[0] == 0) s.lengths[0] = 1;
  s.positions = *rc::gen::arbitrary<bool>();
  s.causal = *rc::gen::arbitrary<bool>();
  s.window = *rc::gen::element<std::int64_t>(0, 0, 1, 9);
  s.bias = *rc::gen::element(bias_kind::none, bias_kind::alibi, bias_kind::t5, bias_kind::fox, bias_kind::gated_key,
                             bias_kind::gated_qk);
  s.rows = *rc::gen::element(16, 32);
  RC_ASSERT(run_backward<float>(s, *rc::gen::arbitrary<std::uint32_t>(), "random f32") == "");
}

}  // namespace
}  // namespace grape
