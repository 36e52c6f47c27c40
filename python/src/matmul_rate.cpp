// grape._grape._tile_product_gflops: the rate of the attention's tile product on one matrix path,
// in cache (240 × 128 · 128 × 128 tiles, as the flash loop multiplies them), on `threads`
// threads: the attainable peak of those instructions on this machine, which the Python benchmark
// (bench/python/attention_vs_sdpa.py) divides the attention's rate by.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "cpu/bf16_tiles.hpp"
#include "cpu/matmul_path.hpp"
#include "cpu/packed_gemm.hpp"
#include "cpu/threads.hpp"
#include "grape/detail/error.hpp"

namespace nb = nanobind;

namespace grape::python {

namespace {

/// Seconds for `reps` products of one thread's own tiles on the path.
double tile_products(bool bf16, int reps) {
  namespace packed = cpu::detail::packed;
  namespace b16 = cpu::detail::bf16;
  constexpr std::int64_t M = 240, N = 128, K = 128;
  std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
  packed::buffer lhs(packed::lhs_floats(N, K)), rhs(K * M);
  b16::buffer ar(M * b16::row_elements(K)), bp(b16::packed_elements(K, N));
  if (bf16) {
    b16::round_rows(ar.data(), b16::row_elements(K), a.data(), K, M, K);
    b16::pack_b(bp.data(), b.data(), N, 1, K, N);
  } else {
    packed::pack_lhs<Eigen::ColMajor>(lhs.data(), b.data(), N, N, K);
    packed::pack_rhs(rhs.data(), a.data(), K, K, M);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    if (bf16) b16::multiply(c.data(), N, ar.data(), b16::row_elements(K), bp.data(), M, N, K, false);
    else packed::multiply_add(c.data(), N, lhs.data(), rhs.data(), N, K, M);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void bind_matmul_rate(nb::module_& m) {
  m.def("_tile_product_gflops", [](const std::string& path, int threads) {
    const bool bf16 = path == "avx512bf16";
    if (!bf16 && path != "f32") throw input_error("path must be f32 or avx512bf16");
    if (bf16 && !cpu::cpu_matmul_units().avx512_bf16) throw input_error("this CPU has no AVX512-BF16");
    constexpr int reps = 400;
    double best = 0;
    for (int round = 0; round < 3; ++round) {
      std::vector<double> seconds(static_cast<std::size_t>(threads));
#pragma omp parallel num_threads(threads)
      seconds[static_cast<std::size_t>(cpu::detail::thread_index())] = tile_products(bf16, reps);
      const double slowest = *std::max_element(seconds.begin(), seconds.end());
      best = std::max(best, 2.0 * 240 * 128 * 128 * reps * threads / slowest / 1e9);
    }
    return best;
  }, nb::arg("path"), nb::arg("threads"));
}

}  // namespace grape::python
