// The whole score through the kernels equals the model's: for encodings with a score bias
// (ALiBi, T5 buckets, RoPE + ALiBi composed), encode Q and K with cpu::rotate_qk(instance, args)
// where there is a rotation, write the bias tile with cpu::bias_tile_of(instance, tile), and
// q̃_iᵀk̃_j + tile[h, i, j] must equal the instance's float64 score(h, q_i, k_j, i, j), which
// is what the checker proves laws about.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/encode_bias.hpp"
#include "cpu/encode_qk.hpp"
#include "grape/builtins.hpp"

namespace grape {
namespace {

/// Q and K [tokens, heads, head_dim] at positions 0 … tokens−1 (float32), and the instance.
template <class E, bool Rotate>
void kernel_scores_equal_model_scores(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  const int d = inst.content_dim(), heads = inst.heads();
  const std::int64_t tokens = 1 + static_cast<std::int64_t>(rng() % 40);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> q(tokens * heads * d), k(q.size());
  for (auto& v : q) v = n(rng);
  for (auto& v : k) v = n(rng);
  std::vector<float> qe = q, ke = k;
  if constexpr (Rotate) {
    cpu::rotate_qk_args args;
    args.q = {q.data(), qe.data(), heads, static_cast<std::int64_t>(q.size()), 0, heads * d, d};
    args.k = {k.data(), ke.data(), heads, static_cast<std::int64_t>(k.size()), 0, heads * d, d};
    args.seq_len = tokens;
    cpu::rotate_qk(inst, args);
  }
  std::vector<float> tile(heads * tokens * tokens);
  cpu::bias_tile tb;
  tb.out = tile.data();
  tb.heads = heads;
  tb.q_len = tb.k_len = tokens;
  cpu::bias_tile_of(inst, tb);
  double worst = 0;
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < tokens; ++i)
      for (std::int64_t j = 0; j < tokens; ++j) {
        const std::int64_t qi = (i * heads + h) * d, kj = (j * heads + h) * d;
        double kernel = tile[(h * tokens + i) * tokens + j];
        for (int c = 0; c < d; ++c) kernel += static_cast<double>(qe[qi + c]) * ke[kj + c];
        std::vector<double> qd(q.begin() + qi, q.begin() + qi + d), kd(k.begin() + kj, k.begin() + kj + d);
        const double model = inst.score(h, qd.data(), kd.data(), std::array<std::int64_t, 1>{i},
                                        std::array<std::int64_t, 1>{j});
        worst = std::max(worst, std::abs(kernel - model) / (1.0 + std::abs(model)));
      }
  EXPECT_LT(worst, 2e-5 * std::sqrt(static_cast<double>(d))) << E::name << " seed " << seed;
}

TEST(InstanceScore, AlibiTileEqualsTheModel) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) kernel_scores_equal_model_scores<alibi, false>(seed);
}

TEST(InstanceScore, T5TileEqualsTheModel) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) kernel_scores_equal_model_scores<t5_buckets, false>(seed);
}

TEST(InstanceScore, RopeAlibiRotationAndTileEqualTheModel) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) kernel_scores_equal_model_scores<rope_alibi, true>(seed);
}

TEST(InstanceScore, TileHeadsMustMatchTheEncoding) {
  const auto inst = alibi::make(alibi::default_params());
  std::vector<float> tile(4);
  cpu::bias_tile tb;
  tb.out = tile.data();
  tb.heads = inst.heads() + 1;
  tb.q_len = tb.k_len = 1;
  EXPECT_THROW(cpu::bias_tile_of(inst, tb), input_error);
}

}  // namespace
}  // namespace grape
