// The GPU check's part for the content-dependent encodings (tests/gpu/run.sh), compiled by g++
// against the CUDA runtime: GRAPE-M's per-head contextual rotation and the gated and path-integral
// bias tiles on the device, each against the CPU kernel on the same random inputs, timed against a
// same-traffic pass.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cpu/encode_bias.hpp"
#include "cpu/gated_linear_grad.hpp"
#include "cpu/grape_m.hpp"
#include "cpu/path_integral_grad.hpp"
#include "cuda/gated_path_bias_cuda.hpp"
#include "cuda/grape_m_cuda.hpp"
#include "gpu_check.hpp"

namespace grape_gpu {
namespace {

/// GRAPE-M, bf16 in place, 32 query heads × 128 over 8 key heads, a θ row per key head, turned by
/// float64 per-token phases per key head (contextual) up to 3·10^5, against the CPU kernel; then
/// its parameter gradients (dL/dθ, dL/dΦ) against the CPU's, on the same inputs.
std::vector<row> run_grape_m(std::int64_t tokens, int iterations) {
  constexpr int q_heads = 32, kv_heads = 8, head_dim = 128, planes = 64;
  std::mt19937_64 rng(43);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_real_distribution<double> rate(0.0, 10.0);
  std::vector<double> freqs(kv_heads * planes), phases(kv_heads * tokens);
  for (int h = 0; h < kv_heads; ++h)
    for (int j = 0; j < planes; ++j) freqs[h * planes + j] = std::pow(10000.0, -2.0 * j / head_dim) * (1 + 0.01 * h);
  for (int h = 0; h < kv_heads; ++h) {
    double phi = 0;
    for (std::int64_t t = 0; t < tokens; ++t) phases[h * tokens + t] = phi += rate(rng);
  }
  const std::int64_t q_elems = tokens * q_heads * head_dim, k_elems = tokens * kv_heads * head_dim;
  std::vector<Eigen::bfloat16> q(q_elems), k(k_elems);
  for (auto& x : q) x = Eigen::bfloat16(g(rng));
  for (auto& x : k) x = Eigen::bfloat16(g(rng));
  Eigen::bfloat16 *dq, *dk, *dcopy;
  double* dphases;
  int* dflag;
  const std::size_t q_bytes = q_elems * 2, k_bytes = k_elems * 2;
  CHECK(cudaMalloc(&dq, q_bytes));
  CHECK(cudaMalloc(&dk, k_bytes));
  CHECK(cudaMalloc(&dcopy, q_bytes + k_bytes));
  CHECK(cudaMalloc(&dphases, phases.size() * sizeof(double)));
  CHECK(cudaMalloc(&dflag, sizeof(int)));
  CHECK(cudaMemset(dflag, 0, sizeof(int)));
  CHECK(cudaMemcpy(dq, q.data(), q_bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk, k.data(), k_bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dphases, phases.data(), phases.size() * sizeof(double), cudaMemcpyHostToDevice));
  grape::cpu::grape_m_spec spec;
  spec.head_dim = head_dim;
  spec.planes = planes;
  spec.freqs = freqs.data();
  spec.freq_rows = kv_heads;
  grape::cpu::rotate_qk_args args;
  args.type = grape::cpu::dtype::bf16;
  args.q = {dq, dq, q_heads, q_elems, 0, q_heads * head_dim, head_dim};
  args.k = {dk, dk, kv_heads, k_elems, 0, kv_heads * head_dim, head_dim};
  args.seq_len = tokens;
  const grape::cuda::device_grape_m m(spec);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  grape::cuda::grape_m_rotate_qk(m, args, {dphases, kv_heads}, tokens, dflag, stream);
  CHECK(cudaStreamSynchronize(stream));
  std::vector<Eigen::bfloat16> q_gpu(q_elems), k_gpu(k_elems);
  CHECK(cudaMemcpy(q_gpu.data(), dq, q_bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(k_gpu.data(), dk, k_bytes, cudaMemcpyDeviceToHost));
  int flag = 0;
  CHECK(cudaMemcpy(&flag, dflag, sizeof(int), cudaMemcpyDeviceToHost));
  grape::cpu::rotate_qk_args host = args;
  host.q = {q.data(), q.data(), q_heads, q_elems, 0, q_heads * head_dim, head_dim};
  host.k = {k.data(), k.data(), kv_heads, k_elems, 0, kv_heads * head_dim, head_dim};
  spec.phases = phases.data();
  spec.phase_rows = kv_heads;
  grape::cpu::grape_m_rotate_qk(spec, host);
  double worst = flag ? INFINITY : 0.0;
  for (std::int64_t i = 0; i < q_elems; ++i)
    worst = std::max(worst, std::fabs(static_cast<float>(q_gpu[i]) - static_cast<float>(q[i])) / (1.0 + std::fabs(static_cast<float>(q[i]))));
  for (std::int64_t i = 0; i < k_elems; ++i)
    worst = std::max(worst, std::fabs(static_cast<float>(k_gpu[i]) - static_cast<float>(k[i])) / (1.0 + std::fabs(static_cast<float>(k[i]))));
  const float kernel_ms = time_ms(stream, iterations, [&] {
    grape::cuda::grape_m_rotate_qk(m, args, {dphases, kv_heads}, tokens, dflag, stream);
  });
  const float copy_ms = time_ms(stream, iterations, [&] {
    CHECK(cudaMemcpyAsync(dcopy, dq, q_bytes, cudaMemcpyDeviceToDevice, stream));
    CHECK(cudaMemcpyAsync(dcopy + q_elems, dk, k_bytes, cudaMemcpyDeviceToDevice, stream));
  });
  const double moved = 2.0 * (q_bytes + k_bytes);
  row r{};
  std::snprintf(r.name, sizeof r.name, "grape_m bf16 ctx phases 32/8x128");
  r.max_error = worst;
  r.tolerance = 1.6e-2;
  r.rope_gbs = moved / kernel_ms / 1e6;
  r.copy_gbs = moved / copy_ms / 1e6;

  // Gradients: x = the rotated Q and K the device holds (the same on both sides), random dL/d(out)
  // in the copy buffer; the same traffic as the rotation (x and g read).
  std::vector<Eigen::bfloat16> gq(q_elems), gk(k_elems);
  for (auto& x : gq) x = Eigen::bfloat16(g(rng));
  for (auto& x : gk) x = Eigen::bfloat16(g(rng));
  CHECK(cudaMemcpy(dcopy, gq.data(), q_bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dcopy + q_elems, gk.data(), k_bytes, cudaMemcpyHostToDevice));
  double *d_freqs, *d_phases;
  CHECK(cudaMalloc(&d_freqs, freqs.size() * sizeof(double)));
  CHECK(cudaMalloc(&d_phases, phases.size() * sizeof(double)));
  const auto device_grads = [&] {
    grape::cuda::grape_m_param_grads(m, args, {dphases, kv_heads}, dcopy, dcopy + q_elems, {d_freqs, d_phases}, tokens,
                                     dflag, stream);
  };
  device_grads();
  CHECK(cudaStreamSynchronize(stream));
  std::vector<double> gpu_freqs(freqs.size()), gpu_phases(phases.size()), cpu_freqs(freqs.size()),
      cpu_phases(phases.size());
  CHECK(cudaMemcpy(gpu_freqs.data(), d_freqs, freqs.size() * sizeof(double), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gpu_phases.data(), d_phases, phases.size() * sizeof(double), cudaMemcpyDeviceToHost));
  host.q = {q_gpu.data(), q_gpu.data(), q_heads, q_elems, 0, q_heads * head_dim, head_dim};
  host.k = {k_gpu.data(), k_gpu.data(), kv_heads, k_elems, 0, kv_heads * head_dim, head_dim};
  grape::cpu::grape_m_param_grads(spec, host, gq.data(), gk.data(), {cpu_freqs.data(), cpu_phases.data()});
  const auto relative = [](const std::vector<double>& want, const std::vector<double>& got) {
    double scale = 1e-300, error = 0;
    for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::fabs(want[i]));
    for (std::size_t i = 0; i < want.size(); ++i) error = std::max(error, std::fabs(want[i] - got[i]) / scale);
    return error;
  };
  const float grads_ms = time_ms(stream, iterations, device_grads);
  row gr{};
  std::snprintf(gr.name, sizeof gr.name, "grape_m grads dtheta dphi 32/8x128");
  gr.max_error = std::max(relative(cpu_freqs, gpu_freqs), relative(cpu_phases, gpu_phases));
  gr.tolerance = 1e-5;  // of the largest entry: float32 cos/sin on the device, float64 on the CPU
  gr.rope_gbs = moved / grads_ms / 1e6;
  gr.copy_gbs = r.copy_gbs;
  cudaFree(d_freqs);
  cudaFree(d_phases);
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dcopy);
  cudaFree(dphases);
  cudaFree(dflag);
  cudaStreamDestroy(stream);
  return {r, gr};
}

/// A GRAPE paper bias tile (the causal square of `length` tokens, 8 heads) against the CPU tile;
/// its bandwidth of tile written against a memset of the same tile.
template <class DeviceBias, class Instance>
row run_bias(const char* name, const Instance& inst, std::int64_t length, int iterations) {
  const std::int64_t heads = inst.heads(), elems = heads * length * length;
  float* dtile;
  CHECK(cudaMalloc(&dtile, elems * sizeof(float)));
  const DeviceBias bias(inst);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const grape::cpu::bias_tile tile{dtile, heads, 0, length, 0, length, 0};
  grape::cuda::bias_tile(bias, tile, stream);
  CHECK(cudaStreamSynchronize(stream));
  std::vector<float> gpu(elems), cpu(elems);
  CHECK(cudaMemcpy(gpu.data(), dtile, elems * sizeof(float), cudaMemcpyDeviceToHost));
  grape::cpu::bias_tile_of(inst, {cpu.data(), heads, 0, length, 0, length, 0});
  double worst = 0;
  for (std::int64_t i = 0; i < elems; ++i)
    if (!(gpu[i] == cpu[i]))  // −∞ above the diagonal on both sides
      worst = std::max(worst, std::fabs(static_cast<double>(gpu[i]) - cpu[i]) / (1.0 + std::fabs(cpu[i])));
  const float kernel_ms = time_ms(stream, iterations, [&] { grape::cuda::bias_tile(bias, tile, stream); });
  const float fill_ms = time_ms(stream, iterations, [&] { CHECK(cudaMemsetAsync(dtile, 0, elems * sizeof(float), stream)); });
  row r{};
  std::snprintf(r.name, sizeof r.name, "%s", name);
  r.max_error = worst;
  r.tolerance = 2.4e-7;  // float64 element, rounded once (device and host libm may differ by an ulp)
  r.rope_gbs = elems * 4.0 / kernel_ms / 1e6;
  r.copy_gbs = elems * 4.0 / fill_ms / 1e6;
  cudaFree(dtile);
  cudaStreamDestroy(stream);
  return r;
}

/// GRAPE-AP's dL/dp from a random dL/d(tile) [8, T, T] against cpu::path_integral_grad; its rate
/// as bytes of the tile gradient read against a memset of them.
row run_path_integral_grad(const grape::bias_instance<grape::path_integral_bias>& inst, int iterations) {
  const grape::path_integral_bias& b = inst.bias;
  const std::int64_t T = b.length, tile = b.num_heads * T * T, n = b.num_heads * T * b.dim;
  std::mt19937_64 rng(45);
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<double> G(tile), want(n), got(n);
  for (auto& x : G) x = z(rng);
  double *dG, *dgrad, *dscratch;
  CHECK(cudaMalloc(&dG, tile * sizeof(double)));
  CHECK(cudaMalloc(&dgrad, n * sizeof(double)));
  CHECK(cudaMalloc(&dscratch, n * sizeof(double)));
  CHECK(cudaMemcpy(dG, G.data(), tile * sizeof(double), cudaMemcpyHostToDevice));
  const grape::cuda::device_path_integral_bias bias(inst);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  grape::cuda::path_integral_grad(bias, dG, dgrad, dscratch, stream);
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaMemcpy(got.data(), dgrad, n * sizeof(double), cudaMemcpyDeviceToHost));
  grape::cpu::path_integral_grad(b, G.data(), want.data());
  double scale = 1e-300, error = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (std::int64_t i = 0; i < n; ++i) error = std::max(error, std::fabs(got[i] - want[i]) / scale);
  const float kernel_ms = time_ms(stream, iterations, [&] { grape::cuda::path_integral_grad(bias, dG, dgrad, dscratch, stream); });
  const float fill_ms = time_ms(stream, iterations, [&] { CHECK(cudaMemsetAsync(dG, 0, tile * sizeof(double), stream)); });
  row r{};
  std::snprintf(r.name, sizeof r.name, "grape_ap_relative grad 8x%lld^2", static_cast<long long>(T));
  r.max_error = error;
  r.tolerance = 1e-12;  // float64 throughout; the atomic sums' order differs
  r.rope_gbs = tile * 8.0 / kernel_ms / 1e6;
  r.copy_gbs = tile * 8.0 / fill_ms / 1e6;
  cudaFree(dG);
  cudaFree(dgrad);
  cudaFree(dscratch);
  cudaStreamDestroy(stream);
  return r;
}

/// Gated GRAPE-A's dL/d(ω, gates) from a random dL/d(tile) [heads, T, T] against
/// cpu::gated_linear_grad; its rate as bytes of the tile gradient read against a memset of them.
row run_gated_grad(const grape::bias_instance<grape::gated_linear_bias>& inst, int iterations) {
  const grape::gated_linear_bias& b = inst.bias;
  const std::int64_t T = b.length, tile = b.num_heads * T * T, n = static_cast<std::int64_t>(b.parameter_count());
  std::mt19937_64 rng(47);
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<double> G(tile), want(n), got(n);
  for (auto& x : G) x = z(rng);
  double* dG = upload(G);
  double* dgrad = upload(got);
  const grape::cuda::device_gated_bias bias(inst);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  grape::cuda::gated_linear_grad(bias, dG, dgrad, stream);
  CHECK(cudaStreamSynchronize(stream));
  got = download(dgrad, got.size());
  grape::cpu::gated_linear_grad(b, G.data(), want.data());
  double scale = 1e-300, error = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (std::int64_t i = 0; i < n; ++i) error = std::max(error, std::fabs(got[i] - want[i]) / scale);
  const float kernel_ms = time_ms(stream, iterations, [&] { grape::cuda::gated_linear_grad(bias, dG, dgrad, stream); });
  const float fill_ms = time_ms(stream, iterations, [&] { CHECK(cudaMemsetAsync(dG, 0, tile * sizeof(double), stream)); });
  row r{};
  std::snprintf(r.name, sizeof r.name, "grape_a_qk_gated grad 8x%lld^2", static_cast<long long>(T));
  r.max_error = error;
  r.tolerance = 1e-12;  // the same sums in the same order; the device may fuse a multiply-add
  r.rope_gbs = tile * 8.0 / kernel_ms / 1e6;
  r.copy_gbs = tile * 8.0 / fill_ms / 1e6;
  cudaFree(dG);
  cudaFree(dgrad);
  cudaStreamDestroy(stream);
  return r;
}

}  // namespace

std::vector<row> content_encoding_rows(std::int64_t tokens, int iterations) {
  std::vector<row> rows;
  for (const row& r : run_grape_m(tokens, iterations)) rows.push_back(r);
  std::mt19937_64 rng(44);
  std::normal_distribution<double> z(0.0, 2.0);
  const std::int64_t length = 2048;
  std::vector<double> w(8), gates(8 * length), projections(8 * length * 16);
  for (auto& x : w) x = z(rng);
  for (auto& x : gates) x = z(rng);
  for (auto& x : projections) x = z(rng);
  rows.push_back(run_bias<grape::cuda::device_gated_bias>(
      "grape_a_key_gated tile 8x2048^2", grape::grape_a_key_gated::make({8, 64, w, gates}), length, iterations));
  const auto path = grape::grape_ap_relative::make({8, 64, 16, 1e-6, projections});
  rows.push_back(run_bias<grape::cuda::device_path_integral_bias>("grape_ap_relative tile 8x2048^2", path, length,
                                                                 std::max(1, iterations / 10)));
  std::vector<double> shorter(projections.begin(), projections.begin() + 8 * 1024 * 16);  // the CPU's grad is O(H·T²·P)
  rows.push_back(run_path_integral_grad(grape::grape_ap_relative::make({8, 64, 16, 1e-6, shorter}),
                                        std::max(1, iterations / 10)));
  rows.push_back(run_gated_grad(grape::grape_a_qk_gated::make({8, 64, w, gates, gates}), std::max(1, iterations / 10)));
  return rows;
}

}  // namespace grape_gpu
