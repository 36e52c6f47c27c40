// The instance adapters of the bias and embedding kernels (cpu/encode_bias.hpp,
// cpu/encode_embedding.hpp) against float64 values written here from the formulas: FoX's tile is a
// sum of log σ(z) gates, the sinusoid is sin/cos of m·base^(−2i/d), the learned table a lookup.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/encode_bias.hpp"
#include "cpu/encode_embedding.hpp"
#include "grape/detail/error.hpp"

namespace grape::test {
namespace {

TEST(encode_adapters, fox_instance_tile_sums_log_sigmoid_gates) {
  const int heads = 2;
  const std::int64_t length = 30;
  std::vector<double> z(heads * length);
  for (std::size_t i = 0; i < z.size(); ++i) z[i] = std::sin(0.7 * static_cast<double>(i)) * 3.0;
  const auto inst = fox::make({heads, 8, z});
  const std::int64_t q_start = 12, q_len = 9, k_start = 4, k_len = 14;
  std::vector<float> tile(heads * q_len * k_len);
  cpu::bias_tile_of(inst, {tile.data(), heads, q_start, q_len, k_start, k_len});
  for (int h = 0; h < heads; ++h)
    for (std::int64_t r = 0; r < q_len; ++r)
      for (std::int64_t c = 0; c < k_len; ++c) {
        const std::int64_t i = q_start + r, j = k_start + c;
        const float got = tile[(h * q_len + r) * k_len + c];
        if (j > i) {
          EXPECT_EQ(got, -std::numeric_limits<float>::infinity());
          continue;
        }
        long double sum = 0;
        for (std::int64_t l = j + 1; l <= i; ++l) sum += -std::log1p(std::exp(-static_cast<long double>(z[h * length + l])));
        EXPECT_NEAR(got, static_cast<double>(sum), 2e-7 * (1 + std::abs(static_cast<double>(sum)))) << h << " " << i << " " << j;
      }
}

TEST(encode_adapters, sinusoidal_instance_uses_its_own_base) {
  const int dim = 8;
  const double base = 500.0;
  const auto inst = sinusoidal::make({dim, base});
  const std::int64_t tokens = 4, stride = 11;
  std::vector<float> x(tokens * stride, -0.25f);
  std::vector<std::int64_t> pos{0, 3, 40000, 2000000};
  cpu::add_embedding_of(inst, {x.data(), tokens, dim, stride, pos.data()});
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (int i = 0; i < dim / 2; ++i) {
      const long double a = static_cast<long double>(pos[t]) * std::pow(static_cast<long double>(base), -2.0L * i / dim);
      EXPECT_NEAR(x[t * stride + 2 * i], -0.25 + static_cast<double>(std::sin(a)), 3e-7) << t << " " << i;
      EXPECT_NEAR(x[t * stride + 2 * i + 1], -0.25 + static_cast<double>(std::cos(a)), 3e-7) << t << " " << i;
    }
    for (std::int64_t c = dim; c < stride; ++c) EXPECT_EQ(x[t * stride + c], -0.25f);  // gaps untouched
  }
}

TEST(encode_adapters, learned_instance_adds_its_table_rows) {
  const auto inst = learned_absolute::make({4, 9});
  const std::vector<double>& table = inst.table.values;
  std::vector<float> x(3 * 4, 1.0f);
  std::vector<std::int64_t> pos{2047, 0, 5};
  cpu::add_embedding_of(inst, {x.data(), 3, 4, 4, pos.data()});
  for (int t = 0; t < 3; ++t)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(x[t * 4 + c], 1.0f + static_cast<float>(table[pos[t] * 4 + c])) << t << " " << c;
}

TEST(encode_adapters, mismatched_shapes_are_refused) {
  const auto fox_inst = fox::make({2, 8, std::vector<double>(20, 1.0)});
  std::vector<float> tile(64);
  EXPECT_THROW(cpu::bias_tile_of(fox_inst, {tile.data(), 3, 0, 2, 0, 2}), input_error);
  EXPECT_THROW(cpu::bias_tile_of(fox_inst, {tile.data(), 2, 9, 2, 0, 2}), input_error);  // past the gates
  std::vector<float> x(16);
  std::vector<std::int64_t> pos{0, 1};
  EXPECT_THROW(cpu::add_embedding_of(sinusoidal::make({8, 1e4}), {x.data(), 2, 6, 8, pos.data()}), input_error);
  EXPECT_THROW(cpu::add_embedding_of(learned_absolute::make({4, 1}), {x.data(), 2, 8, 8, pos.data()}), input_error);
}

}  // namespace
}  // namespace grape::test
