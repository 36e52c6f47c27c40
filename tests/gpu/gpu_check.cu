// On a GPU: checks the CUDA rotate_qk, GRAPE-M's per-head and contextual rotation and the GRAPE
// paper's bias tiles against the CPU kernels on fresh random inputs, and reports each kernel's
// bandwidth as a fraction of a same-traffic pass measured in the same run (a device-to-device copy
// of the same bytes; for a bias tile, a memset of the same tile). Built and run by
// tests/gpu/run.sh; prints a short table last.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "cuda/rotate_qk_cuda.hpp"
#include "gpu_check.hpp"

namespace {

using grape_gpu::row;
using grape_gpu::time_ms;

template <class T>
float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else return __bfloat162float(x);
}
template <class T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else return __float2bfloat16_rn(x);
}

template <class T>
row run_case(const char* name, grape::cpu::dtype type, grape::layout_kind layout, std::int64_t tokens, int heads,
             int head_dim, int iterations) {
  grape::rotary_spec spec;
  spec.head_dim = spec.rotary_dim = head_dim;
  spec.layout = layout;
  for (int i = 0; i < head_dim / 2; ++i) spec.inv_freq.push_back(std::pow(500000.0, -2.0 * i / head_dim));
  const std::int64_t elems = tokens * heads * head_dim;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<std::int64_t> pos(0, 2147483647);
  std::vector<T> q(elems), k(elems);
  for (auto& x : q) x = from_float<T>(g(rng));
  for (auto& x : k) x = from_float<T>(g(rng));
  std::vector<std::int64_t> positions(tokens);
  for (auto& p : positions) p = pos(rng);

  T *dq, *dk, *dcopy;
  std::int64_t* dpos;
  int* dflag;
  const std::size_t bytes = elems * sizeof(T);
  CHECK(cudaMalloc(&dq, bytes));
  CHECK(cudaMalloc(&dk, bytes));
  CHECK(cudaMalloc(&dcopy, 2 * bytes));
  CHECK(cudaMalloc(&dpos, tokens * sizeof(std::int64_t)));
  CHECK(cudaMalloc(&dflag, sizeof(int)));
  CHECK(cudaMemset(dflag, 0, sizeof(int)));
  CHECK(cudaMemcpy(dq, q.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk, k.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dpos, positions.data(), tokens * sizeof(std::int64_t), cudaMemcpyHostToDevice));

  grape::cpu::rotate_qk_args args;
  args.type = type;
  const std::int64_t row_elems = static_cast<std::int64_t>(heads) * head_dim;
  args.q = {dq, dq, heads, elems, 0, row_elems, head_dim};
  args.k = {dk, dk, heads, elems, 0, row_elems, head_dim};
  args.seq_len = tokens;
  args.position_ids = dpos;
  grape::cuda::device_rotary tables(spec);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  grape::cuda::rotate_qk(spec, tables, args, tokens, dflag, stream);
  CHECK(cudaStreamSynchronize(stream));
  std::vector<T> q_gpu(elems), k_gpu(elems);
  CHECK(cudaMemcpy(q_gpu.data(), dq, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(k_gpu.data(), dk, bytes, cudaMemcpyDeviceToHost));
  int flag = 0;
  CHECK(cudaMemcpy(&flag, dflag, sizeof(int), cudaMemcpyDeviceToHost));

  grape::cpu::rotate_qk_args host = args;
  host.q = {q.data(), q.data(), heads, elems, 0, row_elems, head_dim};
  host.k = {k.data(), k.data(), heads, elems, 0, row_elems, head_dim};
  host.position_ids = positions.data();
  grape::cpu::rotate_qk(spec, host);
  double worst = flag ? INFINITY : 0.0;
  for (std::int64_t i = 0; i < elems; ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(to_float(q_gpu[i]) - to_float(q[i]))) / (1.0 + std::fabs(to_float(q[i]))));
    worst = std::max(worst, static_cast<double>(std::fabs(to_float(k_gpu[i]) - to_float(k[i]))) / (1.0 + std::fabs(to_float(k[i]))));
  }

  const float rope_ms = time_ms(stream, iterations, [&] { grape::cuda::rotate_qk(spec, tables, args, tokens, dflag, stream); });
  // The same traffic: read and write Q and K once (2 x bytes each way) as one device copy.
  const float copy_ms = time_ms(stream, iterations, [&] { CHECK(cudaMemcpyAsync(dcopy, dq, bytes, cudaMemcpyDeviceToDevice, stream));
                                      CHECK(cudaMemcpyAsync(dcopy + elems, dk, bytes, cudaMemcpyDeviceToDevice, stream)); });
  const double moved = 4.0 * bytes;  // read + write of Q and K
  row r{};
  std::snprintf(r.name, sizeof r.name, "%s", name);
  r.max_error = worst;
  r.tolerance = std::is_same_v<T, float> ? 2e-6 : std::is_same_v<T, __half> ? 2e-3 : 1.6e-2;
  r.rope_gbs = moved / rope_ms / 1e6;
  r.copy_gbs = moved / copy_ms / 1e6;
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dcopy);
  cudaFree(dpos);
  cudaFree(dflag);
  cudaStreamDestroy(stream);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 32768;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  std::vector<row> rows;
  using grape::layout_kind;
  rows.push_back(run_case<__nv_bfloat16>("bf16 half_split q+k 32x128", grape::cpu::dtype::bf16, layout_kind::half_split, tokens, 32, 128, iterations));
  rows.push_back(run_case<__nv_bfloat16>("bf16 interleaved q+k 32x128", grape::cpu::dtype::bf16, layout_kind::interleaved, tokens, 32, 128, iterations));
  rows.push_back(run_case<__half>("f16 half_split q+k 32x128", grape::cpu::dtype::f16, layout_kind::half_split, tokens, 32, 128, iterations));
  rows.push_back(run_case<float>("f32 half_split q+k 32x128", grape::cpu::dtype::f32, layout_kind::half_split, tokens, 32, 128, iterations));
  for (const row& r : grape_gpu::content_encoding_rows(tokens, iterations)) rows.push_back(r);
  for (const row& r : grape_gpu::attention_rows(iterations)) rows.push_back(r);
  for (const row& r : grape_gpu::attention_instance_rows()) rows.push_back(r);
  for (const row& r : grape_gpu::decode_rows(iterations)) rows.push_back(r);
  int failures = 0;
  std::printf("\n%-34s %12s %11s %10s %10s %8s\n", "case", "max_rel_err", "kernel_GB/s", "same_GB/s", "ratio", "check");
  for (const auto& r : rows) {
    const bool ok = r.max_error <= r.tolerance;
    failures += !ok;
    std::printf("%-34s %12.3g %11.1f %10.1f %10.3f %8s\n", r.name, r.max_error, r.rope_gbs, r.copy_gbs,
                r.rope_gbs / r.copy_gbs, ok ? "ok" : "FAIL");
  }
  return failures == 0 ? 0 : 1;
}
