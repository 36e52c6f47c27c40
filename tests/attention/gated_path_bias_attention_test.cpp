// Gated GRAPE-A's and GRAPE-AP's content-dependent biases enter cpu::attention as
// every score bias does (GRAPE-AP through whole-tile suffix sums, add_tile): the output matches
// softmax of q·k/√d + b in float64 over the causal keys.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/attention.hpp"
#include "grape/builtins.hpp"

namespace grape {
namespace {

template <class Instance>
void expect_dense_softmax(const Instance& inst, std::uint64_t seed, std::int64_t tokens = 37) {
  const int heads = inst.heads(), d = inst.content_dim();
  const std::int64_t size = tokens * heads * d;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> q(size), k(size), v(size), out(size);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = normal(rng);
  const std::vector<std::int64_t> cu_seqlens = {0, tokens};

  cpu::attention_args a;
  a.qk.q = {q.data(), nullptr, heads, size, 0, heads * d, d};
  a.qk.k = {k.data(), nullptr, heads, size, 0, heads * d, d};
  a.v = {v.data(), nullptr, heads, size, 0, heads * d, d};
  a.qk.batch = 1;
  a.qk.cu_seqlens = cu_seqlens.data();
  a.out = out.data();
  cpu::attention(inst, a);

  double worst = 0;
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < tokens; ++i) {
      std::vector<double> w(i + 1);
      double top = -INFINITY, total = 0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int c = 0; c < d; ++c) s += double(q[(i * heads + h) * d + c]) * k[(j * heads + h) * d + c];
        w[j] = s / std::sqrt(double(d)) + inst.bias.bias(h, std::array<std::int64_t, 1>{i}, std::array<std::int64_t, 1>{j});
        top = std::max(top, w[j]);
      }
      for (double& x : w) total += (x = std::exp(x - top));
      for (int c = 0; c < d; ++c) {
        double o = 0;
        for (std::int64_t j = 0; j <= i; ++j) o += w[j] / total * v[(j * heads + h) * d + c];
        worst = std::max(worst, std::abs(o - out[(i * heads + h) * d + c]));
      }
    }
  EXPECT_LT(worst, 2e-5);
}

TEST(GatedPathBiasAttention, GatedGrapeAMatchesTheDenseSoftmax) {
  std::mt19937_64 rng(3);
  expect_dense_softmax(grape_a_qk_gated::make(grape_a_qk_gated::random_params(rng)), 5);
}

TEST(GatedPathBiasAttention, GrapeApMatchesTheDenseSoftmax) {
  std::mt19937_64 rng(4);
  expect_dense_softmax(grape_ap_relative::make(grape_ap_relative::random_params(rng)), 6);
}

/// Past one 64-token tile: the whole-tile suffix sums (add_tile) below and on the diagonal.
TEST(GatedPathBiasAttention, GrapeApOverManyTilesMatchesTheDenseSoftmax) {
  std::mt19937_64 rng(5);
  expect_dense_softmax(grape_ap_relative::make(grape_ap_relative::random_params(rng)), 7, 150);
}

}  // namespace
}  // namespace grape
