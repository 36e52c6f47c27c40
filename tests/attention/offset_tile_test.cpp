// add_tile of the offset-only biases (ALiBi, T5 buckets), of FoX's path sums, of gated GRAPE-A's
// gates and of GRAPE-AP's suffix sums (to float32 rounding: its float64 sum runs in another order): the tile the fused
// attention adds equals, bit for bit, the per-logit bias as float, with consecutive positions (the
// Toeplitz path, one evaluation per offset) and with scattered position ids (one per logit); the
// Toeplitz values ALiBi and T5 give the bf16 products (offset_values); which types take the tile.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "grape/encodings/alibi.hpp"
#include "grape/encodings/fox.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "grape/encodings/t5_buckets.hpp"

namespace grape {
namespace {

/// Where a tile's positions are drawn: runs starting in [0, first], scattered ids in [0, last].
struct position_ranges {
  std::int64_t first = 5000, last = 20000;
};

/// add_tile against the per-logit bias: bit for bit (tolerance 0), or within tolerance·(1 + |b|).
template <class Bias>
void tile_equals_each_logit(const Bias& bias, std::mt19937_64& rng, bool consecutive, position_ranges ranges = {},
                            double tolerance = 0) {
  std::uniform_int_distribution<std::int64_t> start(0, ranges.first), any(0, ranges.last), size(1, 70);
  const std::int64_t rows = size(rng), cols = size(rng), ld = cols + 3;
  std::vector<std::int64_t> m(static_cast<std::size_t>(rows)), n(static_cast<std::size_t>(cols));
  const std::int64_t m0 = start(rng), n0 = start(rng);
  for (std::int64_t r = 0; r < rows; ++r) m[r] = consecutive ? m0 + r : any(rng);
  for (std::int64_t c = 0; c < cols; ++c) n[c] = consecutive ? n0 + c : any(rng);
  std::vector<float> S(static_cast<std::size_t>(rows * ld), 0.25f);
  for (int h = 0; h < bias.heads(); ++h) {
    std::fill(S.begin(), S.end(), 0.25f);
    bias.add_tile(h, m.data(), rows, n.data(), cols, S.data(), ld);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const double b = bias.bias(h, {m[r]}, {n[c]});
        if (tolerance == 0 || std::isinf(b))
          ASSERT_EQ(S[r * ld + c], 0.25f + static_cast<float>(b)) << "head " << h << " m " << m[r] << " n " << n[c];
        else
          ASSERT_NEAR(S[r * ld + c], 0.25 + b, tolerance * (1 + std::abs(0.25 + b))) << "head " << h << " m " << m[r];
      }
    for (std::int64_t r = 0; r < rows; ++r)  // the gap after each row is left alone
      for (std::int64_t c = cols; c < ld; ++c) ASSERT_EQ(S[r * ld + c], 0.25f);
    if constexpr (OffsetTileBias<Bias>) {
      // The Toeplitz tile's distinct values: logit (r, c) at values[rows − 1 − r + c], the same
      // float as bias(); none (and nothing written) where the positions are not consecutive.
      std::vector<float> values(static_cast<std::size_t>(rows + cols), 7.0f);
      ASSERT_EQ(bias.offset_values(h, m.data(), rows, n.data(), cols, values.data()), consecutive);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(values[rows - 1 - r + c], consecutive ? static_cast<float>(bias.bias(h, {m[r]}, {n[c]})) : 7.0f)
              << "head " << h << " m " << m[r] << " n " << n[c];
      ASSERT_EQ(values[rows + cols - 1], 7.0f) << "wrote past the values";
    }
  }
}

TEST(OffsetTile, AlibiAndT5TilesEqualTheirPerLogitBias) {
  std::mt19937_64 rng(20261205);
  const auto alibi_inst = alibi::make({5, 16, 8.0, {}});
  for (const bool bidirectional : {true, false})
    for (int trial = 0; trial < 20; ++trial) {
      const auto t5 = t5_buckets::make({3, 16, 32, 128, bidirectional, static_cast<std::uint64_t>(trial)});
      for (const bool consecutive : {true, false}) {
        tile_equals_each_logit(alibi_inst.bias, rng, consecutive);
        tile_equals_each_logit(t5.bias, rng, consecutive);
      }
    }
}

/// FoX: F(m) − F(n) below the diagonal and −∞ above it (keys after the query), the same floats.
TEST(OffsetTile, FoxTileEqualsItsPerLogitBias) {
  std::mt19937_64 rng(20261206);
  std::normal_distribution<double> gate(1.0, 2.0);
  std::vector<double> logits(3 * 20001);
  for (double& z : logits) z = gate(rng);
  const auto inst = fox::make({3, 8, logits});
  for (int trial = 0; trial < 20; ++trial)
    for (const bool consecutive : {true, false}) tile_equals_each_logit(inst.bias, rng, consecutive);
}

/// Gated GRAPE-A (key-gated and query+key-gated): −(m − n)·ω_h·rate below the diagonal, −∞ above
/// it, the same floats as the per-logit bias; a tile past the gates throws as bias() does.
TEST(OffsetTile, GatedGrapeATileEqualsItsPerLogitBias) {
  std::mt19937_64 rng(20261208);
  const auto key = grape_a_key_gated::make({3, 8, {0.3, -0.2, 1.1}, detail::normal_vector(rng, 3 * 20100)});
  const auto both = grape_a_qk_gated::make(
      {2, 8, {}, detail::normal_vector(rng, 2 * 20100), detail::normal_vector(rng, 2 * 20100)});
  for (int trial = 0; trial < 20; ++trial)
    for (const bool consecutive : {true, false}) {
      tile_equals_each_logit(key.bias, rng, consecutive);
      tile_equals_each_logit(both.bias, rng, consecutive);
      // Runs that start close together: most tiles hold the diagonal (masked and unmasked columns).
      tile_equals_each_logit(key.bias, rng, consecutive, {60, 200});
      tile_equals_each_logit(both.bias, rng, consecutive, {60, 200});
    }
  const auto short_gates = grape_a_key_gated::make({1, 8, {}, std::vector<double>(10, 0.5)});
  const std::int64_t m[] = {9, 10}, n[] = {0};
  std::vector<float> S(2, 0.0f);
  EXPECT_THROW(short_gates.bias.add_tile(0, m, 2, n, 1, S.data(), 1), input_error);
}

/// A tile that reaches past the gate sequence fails as the per-logit bias does, naming the position.
TEST(OffsetTile, FoxTilePastTheGateSequenceThrows) {
  const auto inst = fox::make({2, 8, std::vector<double>(2 * 10, 1.0)});
  const std::int64_t m[] = {8, 9, 10}, n[] = {0, 1};
  std::vector<float> S(6, 0.0f);
  try {
    inst.bias.add_tile(1, m, 3, n, 2, S.data(), 2);
    FAIL() << "no error";
  } catch (const input_error& e) {
    EXPECT_STREQ(e.what(), "grape: position: 10 is outside the gate sequence [0, 10)");
  }
  const std::int64_t early[] = {3}, late[] = {4, 11};  // keys after the query: −∞, in range or not
  inst.bias.add_tile(0, early, 1, late, 2, S.data(), 2);
  EXPECT_EQ(S[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(S[1], -std::numeric_limits<float>::infinity());
}

/// GRAPE-AP: each row one suffix sum with consecutive keys, per logit otherwise; the same bias as
/// bias() up to the order of its float64 sum (so within one float32 rounding), −∞ after the query.
TEST(OffsetTile, PathIntegralTileEqualsItsPerLogitBias) {
  std::mt19937_64 rng(20261207);
  const std::int64_t length = 300;
  const auto inst = grape_ap_relative::make({3, 16, 8, 1e-6, detail::normal_vector(rng, 3 * length * 8)});
  for (int trial = 0; trial < 15; ++trial)
    for (const bool consecutive : {true, false})
      tile_equals_each_logit(inst.bias, rng, consecutive, {length - 71, length - 1}, 1.2e-7);
  const std::int64_t past[] = {length}, first[] = {0};  // a query past the sequence names it
  std::vector<float> S(1, 0.0f);
  EXPECT_THROW(inst.bias.add_tile(0, past, 1, first, 1, S.data(), 1), input_error);
}

/// A variant derived from ALiBi that redefines bias() must not inherit ALiBi's tile (it would add
/// ALiBi's bias, not its own: the mutants of tests/laws derive so).
struct zero_alibi_bias : alibi_bias {
  double bias(int, const std::array<std::int64_t, 1>&, const std::array<std::int64_t, 1>&) const { return 0; }
};
static_assert(TileBias<alibi_bias> && TileBias<t5_bias> && TileBias<forget_gate_bias>);
static_assert(!TileBias<zero_alibi_bias>);
// Only the offset-only biases give Toeplitz values; the mutant not its parent's.
static_assert(OffsetTileBias<alibi_bias> && OffsetTileBias<t5_bias>);
static_assert(!OffsetTileBias<forget_gate_bias> && !OffsetTileBias<zero_alibi_bias>);

}  // namespace
}  // namespace grape
