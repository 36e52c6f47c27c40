// Embedding-add kernels against float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu/embedding.hpp"
#include "grape/detail/error.hpp"

namespace grape::test {
namespace {

TEST(embedding, sinusoidal_adds_sin_cos_pairs) {
  const std::int64_t tokens = 9, stride = 70;
  const int dim = 64;
  std::vector<float> x(tokens * stride, 0.5f);
  std::vector<std::int64_t> pos{0, 1, 2, 17, 511, 4096, 100000, 2000000, 7};
  cpu::add_sinusoidal({x.data(), tokens, dim, stride, pos.data()});
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (int i = 0; i < dim / 2; ++i) {
      const double w = std::pow(10000.0, -2.0 * i / dim);
      // The reference angle in long double: m·ω is exact enough for m <= 2e6.
      const long double a = static_cast<long double>(pos[t]) * w;
      EXPECT_NEAR(x[t * stride + 2 * i], 0.5 + std::sin(a), 3e-7) << t << " " << i;
      EXPECT_NEAR(x[t * stride + 2 * i + 1], 0.5 + std::cos(a), 3e-7) << t << " " << i;
    }
    for (std::int64_t c = dim; c < stride; ++c) EXPECT_EQ(x[t * stride + c], 0.5f);  // gaps untouched
  }
}

TEST(embedding, learned_table_lookup) {
  const std::int64_t tokens = 5, rows = 10;
  const int dim = 6;
  std::vector<float> table(rows * dim);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  std::vector<float> x(tokens * dim, 1.0f);
  std::vector<std::int64_t> pos{9, 0, 3, 3, 1};
  cpu::add_learned({x.data(), tokens, dim, dim, pos.data()}, table.data(), rows);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int c = 0; c < dim; ++c) EXPECT_EQ(x[t * dim + c], 1.0f + table[pos[t] * dim + c]);
}

TEST(embedding, bad_arguments) {
  std::vector<float> x(12), table(12);
  std::vector<std::int64_t> pos{0, 2};
  EXPECT_THROW(cpu::add_learned({x.data(), 2, 6, 6, pos.data()}, table.data(), 2), input_error);
  EXPECT_THROW(cpu::add_learned({x.data(), 2, 6, 6, pos.data()}, nullptr, 2), input_error);
  EXPECT_THROW(cpu::add_learned({x.data(), 2, 6, 3, pos.data()}, table.data(), 3), input_error);
  EXPECT_THROW(cpu::add_sinusoidal({x.data(), 2, 5, 6, pos.data()}), input_error);
  EXPECT_THROW(cpu::add_sinusoidal({x.data(), 2, 6, 6, nullptr}), input_error);
  EXPECT_THROW(cpu::add_sinusoidal({nullptr, 2, 6, 6, pos.data()}), input_error);
  pos[1] = -1;
  EXPECT_THROW(cpu::add_sinusoidal({x.data(), 2, 6, 6, pos.data()}), input_error);
  EXPECT_THROW(cpu::add_sinusoidal({x.data(), 2, 6, 6, pos.data()}, 0.5), input_error);
}

}  // namespace
}  // namespace grape::test
