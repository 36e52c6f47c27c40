// CPU emulation of the CUDA gated and path-integral bias tiles (kernels/cuda/gated_path_bias.cu):
// the row bodies run here over the grid the device gets — one thread per element of a gated tile,
// per (head, query) row of a path-integral one, grid-stride when the items outnumber the grid — on
// the arrays of random instances, for tiles
// anywhere in the sequence (on, above and below the diagonal). Every element must be written
// once, equal the CPU tile bit for bit, and equal the type's float64 reference formula
// (reference_bias, written apart from the kernels) to float32 rounding. GRAPE-AP's gradient passes
// against cpu::path_integral_grad, gated GRAPE-A's against cpu::gated_linear_grad.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cpu/encode_bias.hpp"
#include "cpu/gated_linear_grad.hpp"
#include "cpu/path_integral_grad.hpp"
#include "cuda/bias_tile_thread.hpp"
#include "cuda/path_integral_grad_thread.hpp"

namespace grape {
namespace {

/// The tile over a grid of `grid` blocks of `block` threads, every block and thread index.
template <class Rows>
void emulate_grid(const Rows& rows, std::int64_t grid, int block) {
  const std::int64_t items = cuda::bias_tile_items(rows);
  for (std::int64_t b = 0; b < grid; ++b)
    for (int tid = 0; tid < block; ++tid) cuda::run_bias_tile(rows, items, b, tid, grid, block);
}

template <class E>
void emulation_matches(std::uint64_t seed, bool device_grid) {
  std::mt19937_64 rng(seed);
  const auto params = E::random_params(rng);
  const auto inst = E::make(params);
  const std::int64_t length = inst.bias.length, heads = inst.heads();
  std::uniform_int_distribution<std::int64_t> start(0, length - 1);
  cpu::bias_tile tile;
  tile.heads = heads;
  tile.q_start = start(rng);
  tile.k_start = start(rng);
  tile.q_len = std::uniform_int_distribution<std::int64_t>(1, std::min<std::int64_t>(length - tile.q_start, 70))(rng);
  tile.k_len = std::uniform_int_distribution<std::int64_t>(1, std::min<std::int64_t>(length - tile.k_start, 70))(rng);
  tile.threads = 1;
  const std::size_t size = static_cast<std::size_t>(heads * tile.q_len * tile.k_len);
  std::vector<float> device(size, std::numeric_limits<float>::quiet_NaN()), host(size);
  tile.out = device.data();
  const auto rows = cpu::detail::rows_of(inst.bias, tile);  // the host builds these with device copies
  if (device_grid) emulate_grid(rows, cuda::bias_tile_grid(cuda::bias_tile_items(rows)), cuda::bias_tile_block);
  else emulate_grid(rows, *rc::gen::inRange<std::int64_t>(1, 4), *rc::gen::element(1, 7, 32));
  tile.out = host.data();
  cpu::bias_tile_of(inst, tile);
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t r = 0; r < tile.q_len; ++r)
      for (std::int64_t c = 0; c < tile.k_len; ++c) {
        const std::size_t at = static_cast<std::size_t>((h * tile.q_len + r) * tile.k_len + c);
        const std::int64_t i = tile.q_start + r, j = tile.k_start + c;
        RC_ASSERT(device[at] == host[at] || (std::isnan(device[at]) && std::isnan(host[at])));
        const double want = E::reference_bias(params, static_cast<int>(h), i, j);
        if (j > i) {
          RC_ASSERT(device[at] == -std::numeric_limits<float>::infinity());
        } else {
          // float64 sums of up to 512 terms, rounded once to float32.
          RC_ASSERT(std::abs(device[at] - want) <= 1.2e-7 * (1 + std::abs(want)) + 1e-12 * static_cast<double>(i - j));
        }
      }
}

RC_GTEST_PROP(GatedPathBiasCudaEmulation, KeyGatedOnTheDeviceGrid, ()) {
  emulation_matches<grape_a_key_gated>(*rc::gen::arbitrary<std::uint64_t>(), true);
}
RC_GTEST_PROP(GatedPathBiasCudaEmulation, QueryKeyGatedOnAStridedGrid, ()) {
  emulation_matches<grape_a_qk_gated>(*rc::gen::arbitrary<std::uint64_t>(), false);
}
RC_GTEST_PROP(GatedPathBiasCudaEmulation, PathIntegralOnTheDeviceGrid, ()) {
  emulation_matches<grape_ap_relative>(*rc::gen::arbitrary<std::uint64_t>(), true);
}
RC_GTEST_PROP(GatedPathBiasCudaEmulation, PathIntegralOnAStridedGrid, ()) {
  emulation_matches<grape_ap_relative>(*rc::gen::arbitrary<std::uint64_t>(), false);
}

/// GRAPE-AP's gradient (path_integral_grad_thread.hpp): both passes over a strided grid of items
/// against cpu::path_integral_grad on the same random tile gradient, in float64.
RC_GTEST_PROP(GatedPathBiasCudaEmulation, PathIntegralGradientMatchesTheCpu, ()) {
  const int heads = *rc::gen::inRange(1, 4), p_dim = *rc::gen::element(2, 4, 8);
  const std::int64_t length = *rc::gen::inRange<std::int64_t>(1, 60);
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const double eps = 1e-6;
  const auto inst = grape_ap_relative::make(
      {heads, 8, p_dim, eps, detail::normal_vector(rng, static_cast<int>(heads * length * p_dim))});
  const std::vector<double> G = detail::normal_vector(rng, static_cast<int>(heads * length * length));
  const std::size_t n = static_cast<std::size_t>(heads * length * p_dim);
  std::vector<double> want(n), got(n, std::numeric_limits<double>::quiet_NaN()), scratch(n, 0.0);  // zeroed, as the host does
  cpu::path_integral_grad(inst.bias, G.data(), want.data());
  const path_integral_bias& b = inst.bias;
  const cuda::path_integral_grad_call call{heads, length, p_dim, eps, b.slopes.data(), b.rows.data(), b.keys.data(),
                                           b.offset_cos.data(), b.offset_sin.data(), G.data(), got.data(),
                                           scratch.data()};
  const std::int64_t items = heads * length, grid = *rc::gen::inRange<std::int64_t>(1, 4);
  const int block = *rc::gen::element(1, 7, 32);
  for (std::int64_t blk = 0; blk < grid; ++blk)
    for (int tid = 0; tid < block; ++tid) cuda::run_items(cuda::path_integral_grad_rows{call}, items, blk, tid, grid, block);
  for (std::int64_t blk = 0; blk < grid; ++blk)
    for (int tid = 0; tid < block; ++tid) cuda::run_items(cuda::path_integral_grad_tokens{call}, items, blk, tid, grid, block);
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < n; ++i) RC_ASSERT(std::abs(got[i] - want[i]) <= 1e-12 * scale);
}

/// Gated GRAPE-A's gradient: the launch's two passes (tokens, then heads) over strided grids of
/// items against cpu::gated_linear_grad, bit for bit (the same bodies, each item's sums in one order).
RC_GTEST_PROP(GatedPathBiasCudaEmulation, GatedGradientMatchesTheCpu, ()) {
  const bool query_gated = *rc::gen::arbitrary<bool>();
  const int heads = *rc::gen::inRange(1, 5);
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const std::int64_t length = *rc::gen::inRange<std::int64_t>(1, 80);
  const std::vector<double> gates = detail::normal_vector(rng, static_cast<int>(heads * length));
  const auto inst = query_gated ? grape_a_qk_gated::make({heads, 8, {}, gates, gates}).bias
                                : grape_a_key_gated::make({heads, 8, {}, gates}).bias;
  const std::vector<double> G = detail::normal_vector(rng, static_cast<int>(heads * length * length));
  std::vector<double> want(inst.parameter_count()), got(want.size(), std::numeric_limits<double>::quiet_NaN());
  cpu::gated_linear_grad(inst, G.data(), want.data());
  const cpu::gated_linear_grad_call call{heads,           length, inst.omega.data(), inst.key_gate.data(),
                                         query_gated ? inst.query_gate.data() : nullptr, G.data(), got.data()};
  const std::int64_t grid = *rc::gen::inRange<std::int64_t>(1, 4);
  const int block = *rc::gen::element(1, 7, 32);
  for (std::int64_t blk = 0; blk < grid; ++blk)
    for (int tid = 0; tid < block; ++tid)
      cuda::run_items(cpu::gated_linear_grad_tokens{call}, heads * length, blk, tid, grid, block);
  for (std::int64_t blk = 0; blk < grid; ++blk)
    for (int tid = 0; tid < block; ++tid) cuda::run_items(cpu::gated_linear_grad_heads{call}, heads, blk, tid, grid, block);
  for (std::size_t i = 0; i < want.size(); ++i) RC_ASSERT(got[i] == want[i]);
}

TEST(GatedPathBiasCudaEmulation, TheGridCoversEveryItemWithinTheLaunchLimit) {
  EXPECT_EQ(cuda::bias_tile_grid(1), 1);
  EXPECT_EQ(cuda::bias_tile_grid(cuda::bias_tile_block), 1);
  EXPECT_EQ(cuda::bias_tile_grid(cuda::bias_tile_block + 1), 2);
  EXPECT_EQ(cuda::bias_tile_grid(std::int64_t{1} << 40), cuda::bias_tile_max_grid);
  static_assert(cuda::elementwise_rows<kernel::gated_linear_rows>);     // one thread per element
  static_assert(!cuda::elementwise_rows<kernel::path_integral_rows>);  // one thread per row
}

}  // namespace
}  // namespace grape
