// The AVX512-BF16 tile products (cpu/bf16_tiles.hpp) against float64 products of the same
// bf16-rounded operands, on shapes with every kind of edge (odd depths, partial 16-column blocks,
// fewer than 8 rows), an offset bias added at the store, and the rounding to bf16 against Eigen's
// (to nearest even); the path choice (cpu/matmul_path.hpp). Skipped where the CPU has no
// AVX512-BF16.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/bf16_tiles.hpp"
#include "cpu/matmul_path.hpp"
#include "grape/detail/error.hpp"
#include "matmul_paths.hpp"

namespace grape {
namespace {

namespace bf16 = cpu::detail::bf16;

double widen(bf16::element e) {
  const std::uint32_t bits = std::uint32_t{e} << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

bf16::element eigen_round(float x) { return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(x)); }

bool has_bf16() { return cpu::cpu_matmul_units().avx512_bf16; }

TEST(Bf16Tiles, RoundingIsToNearestEvenAsEigens) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 10.0f);
  const std::int64_t rows = 5, depth = 37, ld = bf16::row_elements(depth);
  std::vector<float> a(rows * 40);
  for (auto& x : a) x = g(rng);
  a[3] = 1.0f + std::ldexp(1.0f, -8);  // a tie: rounds to the even 1.0
  a[4] = 1.0f + 3 * std::ldexp(1.0f, -8);  // a tie: rounds up to the even 1 + 2⁻⁶
  std::vector<bf16::element> rows_out(rows * ld, 0xffff), cols_out(rows * ld, 0xffff);
  bf16::round_rows(rows_out.data(), ld, a.data(), 40, rows, depth);
  std::vector<float> at(depth * rows);  // the transpose, for round_columns
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < depth; ++k) at[k * rows + r] = a[r * 40 + k];
  bf16::round_columns(cols_out.data(), ld, at.data(), rows, rows, depth);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = 0; k < depth; ++k) {
      EXPECT_EQ(rows_out[r * ld + k], eigen_round(a[r * 40 + k])) << r << " " << k;
      EXPECT_EQ(cols_out[r * ld + k], eigen_round(a[r * 40 + k])) << r << " " << k;
    }
    EXPECT_EQ(rows_out[r * ld + depth], 0) << "the odd depth's pad";
    EXPECT_EQ(cols_out[r * ld + depth], 0);
  }
  EXPECT_EQ(widen(rows_out[3]), 1.0);
  EXPECT_EQ(widen(rows_out[4]), 1.0 + std::ldexp(1.0, -6));
}

TEST(Bf16Tiles, ProductsMatchFloat64OnEveryEdge) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (const std::int64_t rows : {1, 3, 7, 8, 9, 17, 40})
    for (const std::int64_t cols : {1, 5, 16, 17, 31, 32, 33, 48, 130})
      for (const std::int64_t depth : {1, 2, 7, 24, 65, 128})
        for (const bool accumulate : {false, true}) {
          std::vector<float> a(rows * depth), b(depth * cols);
          for (auto& x : a) x = g(rng);
          for (auto& x : b) x = g(rng);
          const std::int64_t lda = bf16::row_elements(depth), ldc = cols + 3;
          std::vector<bf16::element> ar(rows * lda), bp(bf16::packed_elements(depth, cols));
          bf16::round_rows(ar.data(), lda, a.data(), depth, rows, depth);
          // B given transposed (element (k, n) at b[n·depth + k]) half of the time: K's layout.
          const bool transposed = (rows + cols + depth) % 2 == 0;
          std::vector<float> bt(b.size());
          for (std::int64_t k = 0; k < depth; ++k)
            for (std::int64_t n = 0; n < cols; ++n) bt[n * depth + k] = b[k * cols + n];
          if (transposed) bf16::pack_b(bp.data(), bt.data(), 1, depth, depth, cols);
          else bf16::pack_b(bp.data(), b.data(), cols, 1, depth, cols);
          std::vector<float> c(rows * ldc, 0.5f);
          bf16::multiply(c.data(), ldc, ar.data(), lda, bp.data(), rows, cols, depth, accumulate);
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t n = 0; n < cols; ++n) {
              double exact = accumulate ? 0.5 : 0.0, size = 0.5;
              for (std::int64_t k = 0; k < depth; ++k) {
                const double term = widen(eigen_round(a[r * depth + k])) * widen(eigen_round(b[k * cols + n]));
                exact += term;
                size += std::abs(term);
              }
              // float32 sums of exact products: a few ulps of the terms' size per step.
              ASSERT_NEAR(c[r * ldc + n], exact, 2 * (depth + 2) * 6e-8 * size)
                  << rows << "x" << cols << "x" << depth << " at " << r << "," << n;
            }
            for (std::int64_t n = cols; n < ldc; ++n) ASSERT_EQ(c[r * ldc + n], 0.5f) << "wrote past the columns";
          }
        }
}

/// An offset bias added as the products are stored (multiply's `toeplitz`): bit for bit the
/// product followed by adding toeplitz[c − r], on every edge of rows and columns.
TEST(Bf16Tiles, ToeplitzAddedAtTheStoreEqualsAddingItAfter) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const std::int64_t depth = 33, lda = bf16::row_elements(depth);
  for (const std::int64_t rows : {1, 7, 8, 9, 23, 256})
    for (const std::int64_t cols : {1, 17, 32, 33, 128})
      for (const bool accumulate : {false, true}) {
        std::vector<float> a(rows * depth), b(depth * cols), diagonal(rows + cols - 1);
        for (auto& x : a) x = g(rng);
        for (auto& x : b) x = g(rng);
        for (auto& x : diagonal) x = 100.0f * g(rng);  // large against the products: rounding shows
        std::vector<bf16::element> ar(rows * lda), bp(bf16::packed_elements(depth, cols));
        bf16::round_rows(ar.data(), lda, a.data(), depth, rows, depth);
        bf16::pack_b(bp.data(), b.data(), cols, 1, depth, cols);
        const std::int64_t ldc = cols + 1;
        std::vector<float> after(rows * ldc, 0.5f), at_store(rows * ldc, 0.5f);
        bf16::multiply(after.data(), ldc, ar.data(), lda, bp.data(), rows, cols, depth, accumulate);
        const float* row0 = diagonal.data() + (rows - 1);  // toeplitz[c − r] for row 0 at c
        bf16::multiply(at_store.data(), ldc, ar.data(), lda, bp.data(), rows, cols, depth, accumulate, row0);
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(at_store[r * ldc + c], after[r * ldc + c] + row0[c - r])
                << rows << "x" << cols << " at " << r << "," << c;
          ASSERT_EQ(at_store[r * ldc + cols], 0.5f) << "wrote past the columns";
        }
      }
}

TEST(MatmulPath, Bf16StorageAloneTakesTheBf16Path) {
  for (const cpu::matmul_path p : available_matmul_paths()) {
    const forced_matmul_path forced(p);
    EXPECT_EQ(cpu::matmul_path_for(cpu::dtype::f32), cpu::matmul_path::f32);
    EXPECT_EQ(cpu::matmul_path_for(cpu::dtype::f16), cpu::matmul_path::f32);  // f16 is never rounded to bf16
    EXPECT_EQ(cpu::matmul_path_for(cpu::dtype::bf16), p);
  }
  const forced_matmul_path automatic(cpu::matmul_path::automatic);
  EXPECT_EQ(cpu::matmul_path_for(cpu::dtype::bf16), available_matmul_paths().back());
}

TEST(MatmulPath, AskingForAPathTheCpuLacksThrows) {
  if (has_bf16()) GTEST_SKIP() << "this CPU has AVX512-BF16";
  const forced_matmul_path forced(cpu::matmul_path::avx512_bf16);
  EXPECT_THROW(cpu::matmul_path_for(cpu::dtype::bf16), input_error);
}

}  // namespace
}  // namespace grape
