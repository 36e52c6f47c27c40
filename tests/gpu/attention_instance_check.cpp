// The GPU check's part for cuda::attention(device_attention(instance), args)
// (kernels/cuda/attention_cuda.hpp) against cpu::attention(instance, args) on the same random
// call: built-in rotations and biases (RoPE, RoPE + ALiBi, FoX with per-sequence offsets) and the
// tutorial's own encodings (a score view, a representation's view), contextual GRAPE-M (phases per
// head), GRAPE-AP (its walking path sums), f32 and bf16, padded batches; the backward too, with the
// bias parameters' gradient (ALiBi's slopes, FoX's gates, GRAPE-AP's projections), the rotation
// planes' θ gradient (RoPE) and GRAPE-M's θ and Φ gradients.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cpu/attention.hpp"
#include "cpu/attention_backward.hpp"
#include "cuda/attention_cuda.hpp"
#include "gpu_check.hpp"
#include "grape/builtins.hpp"
#include "grape/view/kernel_traits.hpp"
#include "log_distance.hpp"
#include "quaternion_rope.hpp"

namespace grape_gpu {
namespace {

/// One row (two with the backward): the largest output difference between the device and the CPU,
/// and the backward's largest gradient difference over the largest gradient.
template <class T, class Instance>
std::vector<row> compare(const char* name, grape::cpu::dtype type, const Instance& inst, int heads, int kv_heads,
                         bool backward = false) {
  constexpr std::int64_t batch = 2, seq = 300;
  const int d = inst.content_dim();
  const std::int64_t tokens = batch * seq;
  std::mt19937_64 rng(46);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<T> q(tokens * heads * d), k(tokens * kv_heads * d), v(tokens * kv_heads * d);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = T(g(rng));
  const std::vector<std::int64_t> offsets{5, 17};
  std::vector<T> want(tokens * heads * d), got(want.size());
  std::vector<float> lse(tokens * heads);
  grape::cpu::attention_args a;
  a.qk.type = type;
  a.qk.batch = batch;
  a.qk.seq_len = seq;
  a.qk.offsets = offsets.data();
  const auto tensor = [&](const std::vector<T>& x, int h) {
    return grape::cpu::qk_tensor{x.data(), nullptr, h, static_cast<std::int64_t>(x.size()), seq * h * d, h * d, d};
  };
  a.qk.q = tensor(q, heads);
  a.qk.k = tensor(k, kv_heads);
  a.v = tensor(v, kv_heads);
  a.out = want.data();
  a.lse = lse.data();
  grape::cpu::attention(inst, a);

  T *dq = upload(q), *dk = upload(k), *dv = upload(v), *dout = upload(got);
  std::int64_t* doffsets = upload(offsets);
  int* dflag = upload(std::vector<int>{0});
  float* dlse = upload(lse);
  grape::cpu::attention_args da = a;
  da.qk.q.in = dq;
  da.qk.k.in = dk;
  da.v.in = dv;
  da.qk.offsets = doffsets;
  da.out = dout;
  da.lse = dlse;
  const grape::cuda::device_attention enc(inst);
  grape::cuda::attention(enc, da, tokens, dflag, nullptr);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(got.data(), dout, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
  int flag = 0;
  CHECK(cudaMemcpy(&flag, dflag, sizeof(int), cudaMemcpyDeviceToHost));
  double worst = flag ? 1e30 : 0.0;
  for (std::size_t e = 0; e < got.size(); ++e)
    worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(got[e])) - static_cast<float>(want[e])));
  std::vector<row> rows(1);
  std::snprintf(rows[0].name, sizeof rows[0].name, "%s", name);
  rows[0].max_error = worst;
  rows[0].tolerance = type == grape::cpu::dtype::f32 ? 1e-4 : 3e-2;
  if (backward) {  // from the CPU forward's output and log-sum-exp, now on the device
    std::vector<T> dout_host(want.size()), want_dq(q.size()), want_dk(k.size()), want_dv(v.size());
    for (auto& x : dout_host) x = T(g(rng));
    // The bias parameters' gradient, where the bias has one; contextual GRAPE-M's θ and Φ gradients.
    std::vector<double> want_grad_bias, want_grad_freq, want_grad_phase;
    if constexpr (requires { grape::kernel::bias_part(inst)->parameter_count(); })
      want_grad_bias.assign(grape::kernel::bias_part(inst)->parameter_count(), 0.0);
    if constexpr (grape::cpu::rotates_by_phase<Instance>) {
      want_grad_freq.assign(inst.freqs.size(), 0.0);
      want_grad_phase.assign(inst.phases.size(), 0.0);
    } else if constexpr (requires { grape::rotation_part(inst).rep; }) {  // rotation planes: dL/dθ
      const auto& rotation = grape::rotation_part(inst);
      if (const auto spec = grape::kernel_traits<decltype(rotation.rep)>::plane_spec(rotation))
        want_grad_freq.assign(static_cast<std::size_t>(spec->rotary_dim / 2), 0.0);
    }
    const auto data_or_null = [](std::vector<double>& x) { return x.empty() ? nullptr : x.data(); };
    grape::cpu::attention_backward(inst, a,
                                   {dout_host.data(), want_dq.data(), want_dk.data(), want_dv.data(),
                                    data_or_null(want_grad_bias), data_or_null(want_grad_freq),
                                    data_or_null(want_grad_phase)});
    CHECK(cudaMemcpy(dout, want.data(), want.size() * sizeof(T), cudaMemcpyHostToDevice));
    T *dgrad_out = upload(dout_host), *ddq = upload(want_dq), *ddk = upload(want_dk), *ddv = upload(want_dv);
    const auto on_device = [](const std::vector<double>& x) { return x.empty() ? nullptr : upload(x); };
    double *dgrad_bias = on_device(want_grad_bias), *dgrad_freq = on_device(want_grad_freq),
           *dgrad_phase = on_device(want_grad_phase);
    grape::cuda::attention_backward(enc, da, {dgrad_out, ddq, ddk, ddv, dgrad_bias, dgrad_freq, dgrad_phase}, tokens,
                                    dflag, nullptr);
    CHECK(cudaDeviceSynchronize());
    const std::vector<double> grad_bias = download(dgrad_bias, want_grad_bias.size()),
                              grad_freq = download(dgrad_freq, want_grad_freq.size()),
                              grad_phase = download(dgrad_phase, want_grad_phase.size());
    for (double* p : {dgrad_bias, dgrad_freq, dgrad_phase}) cudaFree(p);
    const std::vector<T> dq_got = download(ddq, q.size()), dk_got = download(ddk, k.size()),
                         dv_got = download(ddv, v.size());
    CHECK(cudaMemcpy(&flag, dflag, sizeof(int), cudaMemcpyDeviceToHost));
    row b{};
    std::snprintf(b.name, sizeof b.name, "%s backward", name);
    b.max_error = flag ? 1e30
                       : std::max({relative_error(dq_got, want_dq), relative_error(dk_got, want_dk),
                                   relative_error(dv_got, want_dv), relative_error(grad_bias, want_grad_bias),
                                   relative_error(grad_freq, want_grad_freq), relative_error(grad_phase, want_grad_phase)});
    b.tolerance = type == grape::cpu::dtype::f32 ? 1e-4 : 3e-2;
    rows.push_back(b);
    for (void* p : {static_cast<void*>(dgrad_out), static_cast<void*>(ddq), static_cast<void*>(ddk),
                    static_cast<void*>(ddv)})
      cudaFree(p);
  }
  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dout),
                  static_cast<void*>(doffsets), static_cast<void*>(dflag), static_cast<void*>(dlse)})
    cudaFree(p);
  return rows;
}

}  // namespace

std::vector<row> attention_instance_rows() {
  using grape::cpu::dtype;
  const auto rope = grape::rope::make({128, 128, 10000.0, 1.0});
  const auto rope_alibi = grape::rope_alibi::make({{128, 128, 10000.0, 1.0}, 8});
  std::mt19937_64 rng(3);
  auto fox_params = grape::fox::random_params(rng);
  fox_params.heads = 8;
  fox_params.head_dim = 64;
  fox_params.gate_logits.resize(8 * 512, 2.0);
  const auto fox = grape::fox::make(fox_params);
  const auto log = log_distance::make({8, 64});
  const auto quaternion = quaternion_rope<>::make({64, 10000.0, 7});
  std::vector<double> thetas(8 * 32);  // contextual GRAPE-M: θ and Φ per head, Φ from 1e4 on
  for (std::size_t i = 0; i < thetas.size(); ++i) thetas[i] = std::pow(10000.0, -static_cast<double>(i % 32) / 32);
  const auto phases = grape::grape_m_contextual::cumulative_phases(rng, 8, 1024, 1e4, 0.0);
  const auto grape_m = grape::grape_m_contextual::make({8, 64, 8, thetas, phases});
  // GRAPE-AP: projections for 512 positions (the offsets reach 316), P = 8.
  const auto grape_ap = grape::grape_ap_relative::make({8, 64, 8, 1e-6, grape::detail::normal_vector(rng, 8 * 512 * 8)});
  std::vector<row> rows;
  auto add = [&](std::vector<row> more) { rows.insert(rows.end(), more.begin(), more.end()); };
  add(compare<float>("instance rope f32", dtype::f32, rope, 8, 2, true));
  add(compare<Eigen::bfloat16>("instance rope bf16", dtype::bf16, rope, 8, 2));
  add(compare<float>("instance rope+alibi f32", dtype::f32, rope_alibi, 8, 4, true));
  add(compare<float>("instance fox offsets f32", dtype::f32, fox, 8, 8, true));
  add(compare<float>("instance log_distance (view) f32", dtype::f32, log, 8, 8, true));
  add(compare<Eigen::bfloat16>("instance log_distance bf16", dtype::bf16, log, 8, 8));
  add(compare<float>("instance quaternion (view) f32", dtype::f32, quaternion, 8, 8, true));
  add(compare<float>("instance grape_m_contextual f32", dtype::f32, grape_m, 8, 8, true));
  add(compare<Eigen::bfloat16>("instance grape_m_contextual bf16", dtype::bf16, grape_m, 8, 8));
  add(compare<float>("instance grape_ap_relative f32", dtype::f32, grape_ap, 8, 2, true));
  add(compare<Eigen::bfloat16>("instance grape_ap_relative bf16", dtype::bf16, grape_ap, 8, 2));
  return rows;
}

}  // namespace grape_gpu
