// cpu::attention_backward against float64 central differences of a dense reference
// (backward_check.hpp): the loss L = Σ G∘O with O computed in float64 from the instance's own
// score (softmax materialized), its directional derivatives along random directions — one (token,
// head) row at a time and the whole tensor — compared with ⟨gradient, direction⟩ from the kernel,
// for Q, K and V under every injection kind. Then the errors. The parameter gradients:
// attention_param_grad_test.cpp.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <random>
#include <vector>

#include "backward_check.hpp"
#include "grape/builtins.hpp"
#include "matmul_paths.hpp"
#include "plain_attention.hpp"

namespace grape {
namespace {

using namespace backward_check;

TEST(AttentionBackward, QKVGradientsMatchCentralDifferences) {
  property("none", 61, 10, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    attention_case<plain, float> c(rng, plain{{std::array{16, 64, 24}[s % 3]}}, 0, 90, 0, 300);
    qkv_gradients(rng, cpu::no_encoding{c.d}, c);
  });
  property("rope", 62, 10, [](std::uint64_t s) { encoding_qkv_gradients<rope>(s, 1000); });
  property("rope f16", 60, 4, [](std::uint64_t s) { encoding_qkv_gradients<rope, Eigen::half>(s, 1000); });
  property("rope bf16", 59, 4, [](std::uint64_t s) { encoding_qkv_gradients<rope, Eigen::bfloat16>(s, 1000); });
  property("alibi", 63, 10, [](std::uint64_t s) { encoding_qkv_gradients<alibi>(s, 100); });
  property("t5", 64, 8, [](std::uint64_t s) { encoding_qkv_gradients<t5_buckets>(s, 0); });
  property("fox", 65, 8, [](std::uint64_t s) { encoding_qkv_gradients<fox>(s, 0); });
  property("grape_a", 66, 8, [](std::uint64_t s) { encoding_qkv_gradients<grape_a>(s, 50); });
  property("rope_alibi", 67, 8, [](std::uint64_t s) { encoding_qkv_gradients<rope_alibi>(s, 500); });
  property("grape_m", 68, 6, [](std::uint64_t s) { encoding_qkv_gradients<grape_m>(s, 100); });
  property("grape_m_contextual", 58, 6, [](std::uint64_t s) { encoding_qkv_gradients<grape_m_contextual>(s, 0); });
  // Narrow windows across the 64-token tiles: a tile pair with one visible corner must not be skipped.
  property("window at the tile edges", 69, 12, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    attention_case<plain, float> c(rng, plain{{16}}, 0, 160, 0, 300);
    c.args.window = std::array{1, 2, 3, 65}[s % 4];
    qkv_gradients(rng, cpu::no_encoding{c.d}, c);
  });
}

/// bf16 storage on every matrix-instruction path this CPU has (cpu/matmul_path.hpp): on
/// avx512_bf16 Q', K', V, dO, P and dS are rounded to bf16 before the five products; the
/// directional derivatives must stay within bf16 storage's tolerance (6·10⁻² of Σ|g_i u_i|).
/// Sequences of up to 200 tokens cross the 64-token blocks; GQA and windows as the call draws them.
TEST(AttentionBackward, Bf16GradientsMatchCentralDifferencesOnEveryMatmulPath) {
  using bf = Eigen::bfloat16;
  for (const cpu::matmul_path path : available_matmul_paths()) {
    SCOPED_TRACE(cpu::matmul_path_name(path));
    const forced_matmul_path forced(path);
    property("none", 81, 4, [](std::uint64_t s) {
      std::mt19937_64 rng(s);
      attention_case<plain, bf> c(rng, plain{{std::array{16, 64, 24, 7}[s % 4]}}, 0, 200, 0, 600);
      qkv_gradients(rng, cpu::no_encoding{c.d}, c);
    });
    const auto encoded = [](auto tag, std::uint64_t s, std::int64_t base) {
      using E = decltype(tag);
      std::mt19937_64 rng(s);
      const auto inst = E::make(E::random_params(rng));
      attention_case<typename E::instance, bf> c(rng, inst, encoding_heads(inst), 200, base, 600);
      qkv_gradients(rng, c.inst, c);
    };
    property("rope", 82, 4, [&](std::uint64_t s) { encoded(rope{}, s, 1000); });
    property("alibi", 83, 3, [&](std::uint64_t s) { encoded(alibi{}, s, 100); });
    property("t5", 84, 3, [&](std::uint64_t s) { encoded(t5_buckets{}, s, 0); });
    property("grape_m_contextual", 85, 3, [&](std::uint64_t s) { encoded(grape_m_contextual{}, s, 0); });
  }
}

/// The switch reaches the backward: on avx512_bf16 the same bf16 call gives other gradients than
/// on f32 (the rounding of the products' operands), within bf16's tolerance of each other.
TEST(AttentionBackward, TheMatmulSwitchReachesTheBackward) {
  if (available_matmul_paths().size() < 2) GTEST_SKIP() << "one matmul path on this CPU";
  const auto gradients = [](cpu::matmul_path path) {
    const forced_matmul_path forced(path);
    std::mt19937_64 rng(11);
    attention_case<rope::instance, Eigen::bfloat16> c(rng, rope::make(rope::random_params(rng)), 8, 200, 0, 600);
    const std::vector<Eigen::bfloat16> G = random_like<Eigen::bfloat16>(rng, c.out.size());
    return run_backward(c.inst, c, G);
  };
  const backward_result f32 = gradients(cpu::matmul_path::f32), bf16 = gradients(cpu::matmul_path::avx512_bf16);
  for (const auto& [a, b] : {std::pair{&f32.dq, &bf16.dq}, {&f32.dk, &bf16.dk}, {&f32.dv, &bf16.dv}}) {
    double differ = 0, size = 0;
    for (std::size_t i = 0; i < a->size(); ++i)
      differ = std::max(differ, std::abs((*a)[i] - (*b)[i])), size = std::max(size, std::abs((*a)[i]));
    EXPECT_GT(differ, 0.0);
    EXPECT_LE(differ, 6e-2 * size);
  }
}

// The backward's dQ' shares go to fixed lanes by key block (cpu/flash_backward.hpp), so one, two
// and three threads give the same bits; sequences of up to 700 tokens (eleven 64-token blocks:
// every lane and a lane's later key blocks), 8 query heads on 8, 4 or 2 KV heads (enough head
// groups for the one pass), causal and not, ALiBi's slope gradient asked for.
TEST(AttentionBackward, GradientsDoNotDependOnTheThreadCount) {
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    std::mt19937_64 rng(seed);
    attention_case<alibi::instance, float> c(rng, alibi::make(alibi::params{8, 32, 8.0, {}}), 8, 700, 0, 700);
    c.args.causal = seed % 2 == 0;
    const std::vector<float> G = random_like<float>(rng, c.out.size());
    std::vector<backward_result> runs;
    for (int threads : {1, 2, 3}) {
      c.args.qk.threads = threads;
      runs.push_back(run_backward(c.inst, c, G, 8));
    }
    for (std::size_t r = 1; r < runs.size(); ++r) {
      EXPECT_EQ(runs[r].dq, runs[0].dq) << "seed " << seed << ", run " << r;
      EXPECT_EQ(runs[r].dk, runs[0].dk) << "seed " << seed << ", run " << r;
      EXPECT_EQ(runs[r].dv, runs[0].dv) << "seed " << seed << ", run " << r;
    }
  }
}

TEST(AttentionBackward, BadArgumentsThrowBeforeAnyWrite) {
  std::mt19937_64 rng(7);
  const auto inst = rope::make(rope::default_params());
  attention_case<rope::instance, float> c(rng, inst, 0, 20, 0, 60);
  cpu::attention(inst, c.args);
  std::vector<float> G(c.out.size(), 1.0f), dq(c.q.size(), 7.0f), dk(c.k.size(), 7.0f), dv(c.v.size(), 7.0f);
  double slope_grad[1];
  const auto expect_error = [&](const auto& encoding, cpu::attention_args a, cpu::attention_grad_args g,
                                const char* what) {
    try {
      cpu::attention_backward(encoding, a, g);
      ADD_FAILURE() << "no error for " << what;
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    for (const auto* x : {&dq, &dk, &dv}) EXPECT_TRUE(std::all_of(x->begin(), x->end(), [](float y) { return y == 7.0f; }));
  };
  const cpu::attention_grad_args g{G.data(), dq.data(), dk.data(), dv.data(), nullptr, nullptr};
  auto a = c.args;
  a.lse = nullptr;
  expect_error(inst, a, g, "lse must hold the forward's log-sum-exp");
  auto bad = g;
  bad.grad_out = nullptr;
  expect_error(inst, c.args, bad, "grad_out must not be null");
  bad = g;
  bad.grad_k = nullptr;
  expect_error(inst, c.args, bad, "grad_q, grad_k and grad_v must not be null");
  bad = g;
  bad.grad_bias = slope_grad;
  expect_error(inst, c.args, bad, "grad_bias: this encoding has no score bias");
  bad = g;
  bad.grad_inv_freq = slope_grad;
  expect_error(cpu::no_encoding{c.d}, c.args, bad, "grad_inv_freq: only a rotation");
  a = c.args;
  a.window = -1;
  expect_error(inst, a, g, "window must be >= 0");
}

/// FoX asked for a position past its gate sequence: the bias throws inside the threaded loop (16
/// heads: 16 work items, so the loop runs on a thread team); the error reaches the caller and
/// nothing is written, in the forward and in the backward.
TEST(AttentionBackward, ABiasErrorInsideTheThreadedLoopReachesTheCaller) {
  std::mt19937_64 rng(8);
  const auto inst = fox::make({16, 8, std::vector<double>(16 * 64, 1.0)});
  attention_case<fox::instance, float> c(rng, inst, 16, 40, 0, 60);
  cpu::attention(inst, c.args);
  std::vector<float> G(c.out.size(), 1.0f), dq(c.q.size(), 7.0f), dk(c.k.size(), 7.0f), dv(c.v.size(), 7.0f);
  c.offsets.assign(c.first.size(), inst.bias.length);  // past the last gate
  c.ids.clear();
  attention_case<fox::instance, float> past(c);
  past.args.qk.threads = 2;
  std::vector<float> out = past.out;
  EXPECT_THROW(cpu::attention(inst, past.args), input_error);
  EXPECT_EQ(out, past.out);
  EXPECT_THROW(cpu::attention_backward(inst, past.args, {G.data(), dq.data(), dk.data(), dv.data(), nullptr, nullptr}),
               input_error);
  for (const auto* x : {&dq, &dk, &dv}) EXPECT_TRUE(std::all_of(x->begin(), x->end(), [](float y) { return y == 7.0f; }));
}

}  // namespace
}  // namespace grape
