// Fused CPU attention (cpu::attention) against Eigen's float32 GEMM measured in the same run:
// each iteration times a 2048×2048×2048 GEMM, the same attention with no encoding, and the
// encoded attention, back to back (the machine is shared: a ratio of neighbours is what holds).
// Summary lines, one per case:
//   case: NAME ratio_to_gemm: X overhead_vs_plain: Y
// ratio_to_gemm = attention FLOP rate / GEMM FLOP rate (medians over iterations; FLOPs of the
// two matrix products only, 4·T²·D·H, half of that causal); overhead_vs_plain = encoded time /
// plain time − 1. Not part of the test suite.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/attention.hpp"
#include "grape/builtins.hpp"

namespace {

using namespace grape;
using clock_type = std::chrono::steady_clock;

template <class F>
double seconds(F&& f) {
  const auto a = clock_type::now();
  f();
  return std::chrono::duration<double>(clock_type::now() - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct problem {
  std::int64_t tokens, heads, kv_heads;
  int d;
  bool causal;
  int threads;
  std::vector<float> q, k, v, out;
  cpu::attention_args args;

  problem(std::int64_t t, std::int64_t h, std::int64_t kvh, int dim, bool c, int th)
      : tokens(t), heads(h), kv_heads(kvh), d(dim), causal(c), threads(th) {
    std::mt19937_64 rng(1);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const auto fill = [&](std::vector<float>& x, std::int64_t n) {
      x.resize(static_cast<std::size_t>(n));
      for (auto& e : x) e = g(rng);
    };
    fill(q, t * h * d);
    fill(k, t * kvh * d);
    fill(v, t * kvh * d);
    out.resize(q.size());
    args.qk.seq_len = t;
    args.qk.q = {q.data(), nullptr, h, static_cast<std::int64_t>(q.size()), t * h * d, h * d, d};
    args.qk.k = {k.data(), nullptr, kvh, static_cast<std::int64_t>(k.size()), t * kvh * d, kvh * d, d};
    args.v = {v.data(), nullptr, kvh, static_cast<std::int64_t>(v.size()), t * kvh * d, kvh * d, d};
    args.qk.threads = th;
    args.out = out.data();
    args.causal = c;
  }
  double flops() const { return 4.0 * static_cast<double>(tokens) * tokens * d * heads * (causal ? 0.5 : 1.0); }
};

/// The GEMM baseline: C = A·B, 2048³, float32, Eigen with the same thread count.
struct gemm {
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(2048, 2048), b = Eigen::MatrixXf::Random(2048, 2048), c{2048, 2048};
  double run(int threads) {
    Eigen::setNbThreads(threads);
    return seconds([&] { c.noalias() = a * b; });
  }
  static double flops() { return 2.0 * 2048.0 * 2048.0 * 2048.0; }
};

template <class Instance>
void attention_case(benchmark::State& state, const std::string& name, const Instance& inst, bool causal, int threads,
                    std::int64_t heads, std::int64_t kv_heads) {
  problem p(2048, heads, kv_heads, 128, causal, threads);
  gemm g;
  std::vector<double> ratio, overhead;
  for (auto _ : state) {
    const double t_gemm = g.run(threads);
    const double t_plain = seconds([&] { cpu::attention(cpu::no_encoding{p.d}, p.args); });
    const double t_enc = seconds([&] { cpu::attention(inst, p.args); });
    state.SetIterationTime(t_enc);
    ratio.push_back((p.flops() / t_enc) / (gemm::flops() / t_gemm));
    overhead.push_back(t_enc / t_plain - 1.0);
  }
  state.counters["ratio_to_gemm"] = median(ratio);
  state.counters["overhead_vs_plain"] = median(overhead);
  fmt::print("case: {} ratio_to_gemm: {:.3f} overhead_vs_plain: {:.3f}\n", name, median(ratio), median(overhead));
}

template <class E>
typename E::params with_heads(typename E::params p, std::int64_t heads) {
  if constexpr (requires { p.heads; }) p.heads = static_cast<int>(heads);
  if constexpr (requires { p.rotary; }) p.rotary.head_dim = p.rotary.rotary_dim = 128;
  else p.head_dim = 128;
  if constexpr (requires { p.rotary_dim; }) p.rotary_dim = 128;
  return p;
}

template <class E>
void register_encoding(const char* label) {
  for (const bool causal : {false, true})
    for (const int threads : {1, 2}) {
      const std::string name = fmt::format("{}/T2048/H8/D128/{}/threads{}", label, causal ? "causal" : "full", threads);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
        const auto inst = E::make(with_heads<E>(E::default_params(), 8));
        attention_case(s, name, inst, causal, threads, 8, 8);
      })->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
    }
}

}  // namespace

int main(int argc, char** argv) {
  register_encoding<rope>("rope");
  register_encoding<alibi>("alibi");
  register_encoding<t5_buckets>("t5");
  register_encoding<grape_a>("grape_a");
  register_encoding<rope_alibi>("rope_alibi");
  benchmark::RegisterBenchmark("plain/T2048/H32/KV8/D128/full/threads2", [](benchmark::State& s) {
    attention_case(s, "plain/T2048/H32/KV8/D128/full/threads2", cpu::no_encoding{128}, false, 2, 32, 8);
  })->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
