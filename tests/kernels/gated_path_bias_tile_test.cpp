// Bias tiles of the gated GRAPE-A and GRAPE-AP encodings against float64 formulas written here
// from docs/grape-paper.md (softplus, ALiBi slopes 2^(−8(h+1)/H), the half-split rotation, the
// path sum term by term), and their bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/encode_bias.hpp"
#include "grape/detail/error.hpp"

namespace grape::test {
namespace {

constexpr double eps32 = 1.1920928955078125e-07;

double slope(int h, int heads) { return std::pow(2.0, -8.0 * (h + 1) / heads); }  // heads a power of 2
double softplus(double x) { return std::log(1 + std::exp(x)); }

std::vector<double> normals(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// Runs the tile and compares each element with want(h, i, j) (finite for j <= i, −∞ after).
template <class Instance>
void expect_tile(const Instance& inst, std::int64_t heads, std::int64_t q_start, std::int64_t q_len,
                 std::int64_t k_start, std::int64_t k_len, const std::function<double(int, std::int64_t, std::int64_t)>& want) {
  std::vector<float> out(heads * q_len * k_len, 99.0f);
  cpu::bias_tile_of(inst, cpu::bias_tile{out.data(), heads, q_start, q_len, k_start, k_len, 2});
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t r = 0; r < q_len; ++r)
      for (std::int64_t c = 0; c < k_len; ++c) {
        const std::int64_t i = q_start + r, j = k_start + c;
        const float got = out[(h * q_len + r) * k_len + c];
        if (j > i) {
          EXPECT_EQ(got, -std::numeric_limits<float>::infinity()) << h << ' ' << i << ' ' << j;
        } else {
          const double w = want(static_cast<int>(h), i, j);
          EXPECT_NEAR(got, w, 2 * eps32 * (1 + std::abs(w))) << h << ' ' << i << ' ' << j;
        }
      }
}

constexpr int heads = 4;
constexpr std::int64_t length = 40;

grape_a_qk_gated::params qk_params() {
  return {heads, 8, normals(1, heads), normals(2, heads * length), normals(3, heads * length)};
}

TEST(gated_path_bias_tile, qk_gated_is_the_closed_form) {
  const auto p = qk_params();
  const auto want = [&](int h, std::int64_t i, std::int64_t j) {
    const double rate = softplus(p.key_gate_logits[h * length + j]) + softplus(p.query_gate_logits[h * length + i]);
    return -static_cast<double>(i - j) * softplus(p.omega_logits[h]) * slope(h, heads) * rate;
  };
  const auto inst = grape_a_qk_gated::make(p);
  expect_tile(inst, heads, 10, 7, 3, 13, want);  // diagonal inside the tile
  expect_tile(inst, heads, 30, 10, 0, 40, want);  // the full key range, tile ends at the sequence's end
  expect_tile(inst, heads, 0, 5, 20, 6, want);    // every key after every query: all masked
}

TEST(gated_path_bias_tile, key_gated_has_no_query_gate_and_unit_omega_by_default) {
  const grape_a_key_gated::params p{heads, 8, {}, normals(4, heads * length)};
  expect_tile(grape_a_key_gated::make(p), heads, 5, 9, 2, 11, [&](int h, std::int64_t i, std::int64_t j) {
    return -static_cast<double>(i - j) * slope(h, heads) * softplus(p.key_gate_logits[h * length + j]);
  });
}

TEST(gated_path_bias_tile, grape_ap_relative_is_the_path_sum) {
  constexpr int P = 4;
  const grape_ap_relative::params p{heads, 8, P, 1e-6, normals(5, heads * length * P)};
  const auto at = [&](int h, std::int64_t t) { return p.projections.data() + (h * length + t) * P; };
  const auto term = [&](int h, std::int64_t i, std::int64_t l) {
    const double *x = at(h, i), *y = at(h, l);
    double ms = 0;
    for (int k = 0; k < P; ++k) ms += y[k] * y[k] / P;
    const double n = 1 / std::sqrt(ms + 1e-6), c = std::cos(static_cast<double>(l - i)), s = std::sin(static_cast<double>(l - i));
    double z = 0;
    for (int k = 0; k < P / 2; ++k)
      z += x[k] * n * (y[k] * c + y[k + P / 2] * s) + x[k + P / 2] * n * (-y[k] * s + y[k + P / 2] * c);
    return slope(h, heads) * std::log(1 / (1 + std::exp(-z / P)));
  };
  const auto want = [&](int h, std::int64_t i, std::int64_t j) {
    double sum = 0;
    for (std::int64_t l = j + 1; l <= i; ++l) sum += term(h, i, l);
    return sum;
  };
  const auto inst = grape_ap_relative::make(p);
  expect_tile(inst, heads, 10, 7, 3, 13, want);   // diagonal inside the tile
  expect_tile(inst, heads, 30, 10, 2, 5, want);   // keys far before the queries: the sum runs past the tile
  expect_tile(inst, heads, 12, 4, 12, 9, want);   // j = i: the empty sum, 0
  expect_tile(inst, heads, 0, 3, 5, 4, want);     // all masked
}

/// One bad argument: one input_error naming it, and the output untouched.
template <class Instance>
void expect_rejected(const Instance& inst, const std::function<void(cpu::bias_tile&)>& mutate, const std::string& names) {
  std::vector<float> out(heads * 4 * 4, 7.0f);
  cpu::bias_tile t{out.data(), heads, 8, 4, 2, 4, 1};
  mutate(t);
  try {
    cpu::bias_tile_of(inst, t);
    ADD_FAILURE() << "no error; expected one naming " << names;
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
  EXPECT_EQ(out, std::vector<float>(heads * 4 * 4, 7.0f));
}

TEST(gated_path_bias_tile, bad_arguments_name_the_field) {
  const auto gated = grape_a_qk_gated::make(qk_params());
  const auto ap = grape_ap_relative::make({heads, 8, 2, 1e-6, normals(6, heads * length * 2)});
  const auto each = [&](const std::function<void(cpu::bias_tile&)>& mutate, const std::string& names) {
    expect_rejected(gated, mutate, names);
    expect_rejected(ap, mutate, names);
  };
  each([](cpu::bias_tile& t) { t.heads = heads - 1; }, "tile.heads");
  each([](cpu::bias_tile& t) { t.out = nullptr; }, "tile.out");
  each([](cpu::bias_tile& t) { t.q_start = -1; }, "tile.q_start");
  each([](cpu::bias_tile& t) { t.k_start = -3; }, "tile.k_start");
  each([](cpu::bias_tile& t) { t.q_len = -1; }, "tile.q_len");
  each([](cpu::bias_tile& t) { t.threads = -1; }, "tile.threads");
  each([](cpu::bias_tile& t) { t.q_start = length - 3; }, "tile.q_start + tile.q_len");
  each([](cpu::bias_tile& t) { t.k_start = length; }, "tile.k_start + tile.k_len");
  each([](cpu::bias_tile& t) { t.k_start = std::numeric_limits<std::int64_t>::max(); }, "tile.k_start + tile.k_len");
}

}  // namespace
}  // namespace grape::test
