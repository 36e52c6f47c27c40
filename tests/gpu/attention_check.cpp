// The GPU check's attention part (tests/gpu/run.sh), compiled by g++ against the CUDA runtime: the
// CUDA flash attention (kernels/cuda/flash_attention_cuda.hpp) against cpu::attention on the same random
// inputs (bf16, f16, f32; causal and not; GQA 32:8; no bias and ALiBi), and its backward against
// cpu::attention_backward, timed as FLOP/s over the device's dense 16-bit tensor-core peak
// (GRAPE_GPU_PEAK_TFLOPS, default 989: H100/H200 SXM).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cpu/attention.hpp"
#include "cpu/attention_backward.hpp"
#include "cuda/flash_attention_cuda.hpp"
#include "gpu_check.hpp"
#include "grape/builtins.hpp"

namespace grape_gpu {
namespace {

double peak_tflops() {
  const char* v = std::getenv("GRAPE_GPU_PEAK_TFLOPS");
  return v ? std::atof(v) : 989.0;
}

/// The forward (and with `backward`, the backward from a random dL/dO) against the CPU's; one row
/// each.
template <class T>
std::vector<row> run_attention(const char* name, grape::cpu::dtype type, bool causal, bool alibi, std::int64_t seq,
                               int iterations, bool backward = false) {
  constexpr int q_heads = 32, kv_heads = 8, d = 128;
  constexpr std::int64_t batch = 2;
  const std::int64_t tokens = batch * seq;
  std::mt19937_64 rng(45);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<T> q(tokens * q_heads * d), k(tokens * kv_heads * d), v(tokens * kv_heads * d);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = T(g(rng));
  std::vector<std::int64_t> cu = {0, seq, 2 * seq};

  // The CPU kernel on the same inputs.
  std::vector<T> want(tokens * q_heads * d);
  std::vector<float> want_lse(tokens * q_heads);
  grape::cpu::attention_args a;
  a.qk.type = type;
  a.qk.q = {q.data(), nullptr, q_heads, static_cast<std::int64_t>(q.size()), 0, q_heads * d, d};
  a.qk.k = {k.data(), nullptr, kv_heads, static_cast<std::int64_t>(k.size()), 0, kv_heads * d, d};
  a.v = {v.data(), nullptr, kv_heads, static_cast<std::int64_t>(v.size()), 0, kv_heads * d, d};
  a.qk.batch = batch;
  a.qk.cu_seqlens = cu.data();
  a.out = want.data();
  a.lse = want_lse.data();
  a.causal = causal;
  const auto alibi_inst = grape::alibi::make({q_heads, d, 8.0, {}});
  if (alibi) grape::cpu::attention(alibi_inst, a);
  else grape::cpu::attention(grape::cpu::no_encoding{d}, a);

  T *dq, *dk, *dv, *dout;
  std::int64_t* dcu;
  float* dslopes;
  int* dflag;
  CHECK(cudaMalloc(&dq, q.size() * sizeof(T)));
  CHECK(cudaMalloc(&dk, k.size() * sizeof(T)));
  CHECK(cudaMalloc(&dv, v.size() * sizeof(T)));
  CHECK(cudaMalloc(&dout, want.size() * sizeof(T)));
  CHECK(cudaMalloc(&dcu, cu.size() * sizeof(std::int64_t)));
  CHECK(cudaMalloc(&dslopes, q_heads * sizeof(float)));
  CHECK(cudaMalloc(&dflag, sizeof(int)));
  CHECK(cudaMemset(dflag, 0, sizeof(int)));
  CHECK(cudaMemcpy(dq, q.data(), q.size() * sizeof(T), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk, k.data(), k.size() * sizeof(T), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dv, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dcu, cu.data(), cu.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
  std::vector<float> slopes(q_heads);
  for (int h = 0; h < q_heads; ++h) slopes[h] = static_cast<float>(alibi_inst.bias.slopes[h]);
  CHECK(cudaMemcpy(dslopes, slopes.data(), q_heads * sizeof(float), cudaMemcpyHostToDevice));

  grape::cuda::flash_args ops;
  ops.type = type;
  ops.q = dq;
  ops.k = dk;
  ops.v = dv;
  ops.out = dout;
  ops.q_heads = q_heads;
  ops.k_heads = ops.v_heads = kv_heads;
  ops.head_dim = d;
  ops.cu_seqlens = dcu;
  ops.batch = batch;
  ops.seq_len = seq;
  ops.tokens = tokens;
  ops.causal = causal;
  ops.error = dflag;
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  auto call = [&] {
    if (alibi) grape::cuda::flash_attention(ops, grape::cuda::alibi_scores{dslopes}, stream);
    else grape::cuda::flash_attention(ops, grape::cuda::no_scores{}, stream);
  };
  call();
  CHECK(cudaStreamSynchronize(stream));
  std::vector<T> got(want.size());
  CHECK(cudaMemcpy(got.data(), dout, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
  int flag = 0;
  CHECK(cudaMemcpy(&flag, dflag, sizeof(int), cudaMemcpyDeviceToHost));
  double worst = flag ? 1e30 : 0.0;
  for (std::size_t e = 0; e < got.size(); ++e)
    worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(got[e])) - static_cast<float>(want[e])));
  const float ms = time_ms(stream, iterations, call);
  const double flops = 4.0 * batch * q_heads * d * static_cast<double>(seq) * seq * (causal ? 0.5 : 1.0);
  std::vector<row> rows(1);
  row& r = rows[0];
  std::snprintf(r.name, sizeof r.name, "%s", name);
  r.max_error = worst;
  r.tolerance = type == grape::cpu::dtype::f32 ? 1e-4 : type == grape::cpu::dtype::f16 ? 4e-3 : 3e-2;
  // Columns of the table: achieved TFLOP/s and the peak it is compared with.
  r.rope_gbs = flops / ms / 1e9;
  r.copy_gbs = peak_tflops();
  if (backward) {
    std::vector<T> grad_out(want.size()), want_dq(q.size()), want_dk(k.size()), want_dv(v.size());
    for (auto& x : grad_out) x = T(g(rng));
    grape::cpu::attention_grad_args ga{grad_out.data(), want_dq.data(), want_dk.data(), want_dv.data()};
    if (alibi) grape::cpu::attention_backward(alibi_inst, a, ga);
    else grape::cpu::attention_backward(grape::cpu::no_encoding{d}, a, ga);
    float* dlse;
    CHECK(cudaMalloc(&dlse, want_lse.size() * sizeof(float)));
    T* dgrad_out = upload(grad_out);
    T* ddq = upload(want_dq);  // overwritten: only the size matters
    T* ddk = upload(want_dk);
    T* ddv = upload(want_dv);
    ops.lse = dlse;
    call();  // the forward again, now with its log-sum-exp
    const grape::cuda::flash_grads grads{dgrad_out, ddq, ddk, ddv};
    auto call_backward = [&] {
      if (alibi) grape::cuda::flash_attention_backward(ops, grads, grape::cuda::alibi_scores{dslopes}, stream);
      else grape::cuda::flash_attention_backward(ops, grads, grape::cuda::no_scores{}, stream);
    };
    call_backward();
    CHECK(cudaStreamSynchronize(stream));
    const double e = std::max({relative_error(download(ddq, want_dq.size()), want_dq),
                               relative_error(download(ddk, want_dk.size()), want_dk),
                               relative_error(download(ddv, want_dv.size()), want_dv)});
    const float backward_ms = time_ms(stream, std::max(1, iterations / 2), call_backward);
    row b{};
    std::snprintf(b.name, sizeof b.name, "%s backward", name);
    b.max_error = e;
    b.tolerance = type == grape::cpu::dtype::f32 ? 1e-4 : type == grape::cpu::dtype::f16 ? 5e-3 : 3e-2;
    b.rope_gbs = 2.5 * flops / backward_ms / 1e9;  // FlashAttention's count: 2.5 forwards
    b.copy_gbs = peak_tflops();
    rows.push_back(b);
    for (void* p : {static_cast<void*>(dlse), static_cast<void*>(dgrad_out), static_cast<void*>(ddq),
                    static_cast<void*>(ddk), static_cast<void*>(ddv)})
      cudaFree(p);
  }
  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dout),
                  static_cast<void*>(dcu), static_cast<void*>(dslopes), static_cast<void*>(dflag)})
    cudaFree(p);
  cudaStreamDestroy(stream);
  return rows;
}

}  // namespace

std::vector<row> attention_rows(int iterations) {
  using grape::cpu::dtype;
  std::vector<row> rows;
  auto add = [&](std::vector<row> more) { rows.insert(rows.end(), more.begin(), more.end()); };
  add(run_attention<Eigen::bfloat16>("attn bf16 causal 2x2048 32:8x128 TF", dtype::bf16, true, false, 2048, iterations,
                                     true));
  add(run_attention<Eigen::bfloat16>("attn bf16 causal alibi 2x2048 TF", dtype::bf16, true, true, 2048, iterations,
                                     true));
  add(run_attention<Eigen::bfloat16>("attn bf16 non-causal 2x2048 TF", dtype::bf16, false, false, 2048, iterations));
  add(run_attention<Eigen::half>("attn f16 causal 2x2048 TF", dtype::f16, true, false, 2048, iterations));
  add(run_attention<float>("attn f32 causal 2x1024 TF", dtype::f32, true, false, 1024, std::max(1, iterations / 4),
                           true));
  return rows;
}

}  // namespace grape_gpu
