// Fused CPU attention (cpu::attention) against Eigen's float32 GEMM measured in the same run:
// each iteration times a 2048×2048×2048 GEMM, then the same attention with no encoding and the
// encoded attention in three alternating pairs (the machine is shared: a ratio of neighbours is
// what holds).
// Summary lines, one per case:
//   case: NAME ratio_to_gemm: X overhead_vs_plain: Y
// ratio_to_gemm = attention FLOP rate / GEMM FLOP rate (medians over iterations; FLOPs of the
// two matrix products only, 4·T²·D·H, half of that causal); overhead_vs_plain = encoded time /
// plain time − 1 (median over the pairs). Backward cases (NAME/backward) count the 5 matrix products of a flash backward,
// 2.5× the forward's FLOPs (grape's two-pass backward computes 7: S and dP twice), and add
// backward_over_forward, the backward's time over its own forward's. Decode cases (one query token
// per sequence against a paged cache, cpu::attention_decode) print
//   case: NAME ratio_to_copy: X
// the K/V bytes read per second over the bytes per second of a copy of the same bytes with the
// same threads, measured back to back. Materialized cases (materialized/…) time the fused kernel
// against the straightforward softmax(QKᵀ/√d + B)·V with every score stored, and print
//   case: NAME speedup_over_materialized: X peak_MiB_fused: A peak_MiB_materialized: B inputs_MiB: C
// (peak resident memory of one run of each in a fresh process). bf16 cases (NAME/bf16…) run bf16
// storage on the float32 products and on the path the CPU picks (cpu/matmul_path.hpp), and print
//   case: NAME ratio_to_gemm: X speedup_over_f32_products: Y
// Not part of the test suite.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <Eigen/Core>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cpu/attention.hpp"
#include "cpu/attention_backward.hpp"
#include "cpu/attention_decode.hpp"
#include "cpu/encode_qk.hpp"
#include "cpu/matmul_path.hpp"
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

/// Times `plain` and `encoded` in three alternating pairs: appends each pair's encoded / plain − 1
/// to `overhead` (a ratio of neighbours, as the machine is shared) and returns the encoded runs'
/// median time.
template <class Plain, class Encoded>
double alternating_pairs(const Plain& plain, const Encoded& encoded, std::vector<double>& overhead) {
  std::vector<double> times;
  for (int pair = 0; pair < 3; ++pair) {
    const double t_plain = seconds(plain), t_encoded = seconds(encoded);
    overhead.push_back(t_encoded / t_plain - 1.0);
    times.push_back(t_encoded);
  }
  return median(times);
}

template <class Instance>
void bench_attention(benchmark::State& state, const std::string& name, const Instance& inst, bool causal, int threads,
                    std::int64_t heads, std::int64_t kv_heads, std::int64_t tokens = 2048, int head_dim = 128) {
  problem p(tokens, heads, kv_heads, head_dim, causal, threads);
  gemm g;
  std::vector<double> ratio, overhead;
  for (auto _ : state) {
    const double t_gemm = g.run(threads);
    const double t_enc = alternating_pairs([&] { cpu::attention(cpu::no_encoding{p.d}, p.args); },
                                           [&] { cpu::attention(inst, p.args); }, overhead);
    state.SetIterationTime(t_enc);
    ratio.push_back((p.flops() / t_enc) / (gemm::flops() / t_gemm));
  }
  state.counters["ratio_to_gemm"] = median(ratio);
  state.counters["overhead_vs_plain"] = median(overhead);
  fmt::print("case: {} ratio_to_gemm: {:.3f} overhead_vs_plain: {:.3f}\n", name, median(ratio), median(overhead));
}

/// bf16 storage: the same attention on the products' f32 path and on the path this CPU picks for
/// bf16 (cpu/matmul_path.hpp), and plain attention on that path in alternating pairs with the
/// latter, in each iteration.
/// Prints ratio_to_gemm (the bf16 call's FLOP rate over the float32 GEMM's),
/// speedup_over_f32_products (f32-path time / its time) and overhead_vs_plain; with a backward,
/// both passes are timed together (3.5× the forward's FLOPs).
template <class Instance>
void bf16_case(benchmark::State& state, const std::string& name, const Instance& inst, bool causal, int threads,
               bool backward) {
  problem p(2048, 8, 8, 128, causal, threads);
  const auto to_bf16 = [](const std::vector<float>& x) {
    std::vector<Eigen::bfloat16> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = Eigen::bfloat16(x[i]);
    return y;
  };
  const std::vector<Eigen::bfloat16> q = to_bf16(p.q), k = to_bf16(p.k), v = to_bf16(p.v), grad_out = to_bf16(p.v);
  std::vector<Eigen::bfloat16> out(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<float> lse(static_cast<std::size_t>(p.tokens * p.heads));
  cpu::attention_args a = p.args;
  a.qk.type = cpu::dtype::bf16;
  a.qk.q.in = q.data();
  a.qk.k.in = k.data();
  a.v.in = v.data();
  a.out = out.data();
  a.lse = lse.data();
  const cpu::attention_grad_args grads{grad_out.data(), dq.data(), dk.data(), dv.data()};
  const auto run = [&] {
    cpu::attention(inst, a);
    if (backward) cpu::attention_backward(inst, a, grads);
  };
  const auto with_path = [&](cpu::matmul_path path) {
    const cpu::matmul_path before = cpu::requested_matmul_path();
    cpu::set_matmul_path(path);
    const double t = seconds(run);
    cpu::set_matmul_path(before);
    return t;
  };
  const auto plain = [&] {
    cpu::attention(cpu::no_encoding{p.d}, a);
    if (backward) cpu::attention_backward(cpu::no_encoding{p.d}, a, grads);
  };
  gemm g;
  std::vector<double> ratio, speedup, overhead;
  for (auto _ : state) {
    const double t_gemm = g.run(threads);
    const double t_f32 = with_path(cpu::matmul_path::f32);
    const double t_bf16 = alternating_pairs(plain, [&] { with_path(cpu::matmul_path::automatic); }, overhead);
    state.SetIterationTime(t_bf16);
    ratio.push_back(((backward ? 3.5 : 1.0) * p.flops() / t_bf16) / (gemm::flops() / t_gemm));
    speedup.push_back(t_f32 / t_bf16);
  }
  state.counters["ratio_to_gemm"] = median(ratio);
  state.counters["speedup_over_f32_products"] = median(speedup);
  state.counters["overhead_vs_plain"] = median(overhead);
  fmt::print("case: {} ratio_to_gemm: {:.3f} speedup_over_f32_products: {:.2f} overhead_vs_plain: {:.3f} (products: {})\n",
             name, median(ratio), median(speedup), median(overhead),
             cpu::matmul_path_name(cpu::matmul_path_for(cpu::dtype::bf16)));
}

template <class E>
typename E::params with_heads(typename E::params p, std::int64_t heads, int head_dim = 128) {
  if constexpr (requires { p.heads; }) p.heads = static_cast<int>(heads);
  if constexpr (requires { p.rotary; }) p.rotary.head_dim = p.rotary.rotary_dim = head_dim;
  else p.head_dim = head_dim;
  if constexpr (requires { p.rotary_dim; }) p.rotary_dim = head_dim;
  return p;
}

/// The backward against plain attention's backward (dQ, dK, dV only); with `params`, the
/// encoding's parameter gradients too (a bias's, contextual GRAPE-M's θ and Φ).
template <class Instance>
void backward_case(benchmark::State& state, const std::string& name, const Instance& inst, bool causal, int threads,
                   bool params = false) {
  problem p(2048, 8, 8, 128, causal, threads);
  std::vector<float> lse(static_cast<std::size_t>(p.tokens * p.heads)), grad_out(p.out.size(), 1e-2f);
  std::vector<float> dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
  p.args.lse = lse.data();
  std::mt19937_64 rng(2);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& x : grad_out) x = g(rng);
  std::vector<double> d_bias, d_freq, d_phase;
  if constexpr (requires { inst.bias.parameter_count(); })
    if (params) d_bias.resize(inst.bias.parameter_count());
  if constexpr (cpu::rotates_by_phase<Instance>)
    if (params) d_freq.resize(inst.freqs.size()), d_phase.resize(inst.phases.size());
  const auto data_or_null = [](std::vector<double>& x) { return x.empty() ? nullptr : x.data(); };
  const cpu::attention_grad_args plain_grads{grad_out.data(), dq.data(), dk.data(), dv.data()};
  const cpu::attention_grad_args grads{grad_out.data(),      dq.data(),           dk.data(), dv.data(),
                                       data_or_null(d_bias), data_or_null(d_freq), data_or_null(d_phase)};
  gemm gm;
  std::vector<double> ratio, overhead, over_forward;
  for (auto _ : state) {
    const double t_gemm = gm.run(threads);
    cpu::attention(cpu::no_encoding{p.d}, p.args);
    const double t_plain = seconds([&] { cpu::attention_backward(cpu::no_encoding{p.d}, p.args, plain_grads); });
    const double t_fwd = seconds([&] { cpu::attention(inst, p.args); });
    const double t_bwd = seconds([&] { cpu::attention_backward(inst, p.args, grads); });
    state.SetIterationTime(t_bwd);
    ratio.push_back((2.5 * p.flops() / t_bwd) / (gemm::flops() / t_gemm));
    overhead.push_back(t_bwd / t_plain - 1.0);
    over_forward.push_back(t_bwd / t_fwd);
  }
  state.counters["ratio_to_gemm"] = median(ratio);
  state.counters["overhead_vs_plain"] = median(overhead);
  state.counters["backward_over_forward"] = median(over_forward);
  fmt::print("case: {} ratio_to_gemm: {:.3f} overhead_vs_plain: {:.3f} backward_over_forward: {:.2f}\n", name,
             median(ratio), median(overhead), median(over_forward));
}

/// The GRAPE paper's content-dependent encodings over 2048 tokens, 8 heads of 128 channels, as
/// their authors' models make them: key gates softplus(z) with z ~ N(0, 1) and ω = slope (their init)
/// (gated GRAPE-A), projections of P = 8 channels (GRAPE-AP), θ of RoPE's base and phases summed
/// from rates sigmoid(z)/16 (contextual GRAPE-M, a row per head).
template <class Body>
void with_paper_instance(const std::string& label, Body&& body) {
  constexpr int heads = 8, d = 128;
  constexpr std::int64_t tokens = 2048;
  std::mt19937_64 rng(5);
  if (label == "grape_a_key_gated")
    body(grape_a_key_gated::make({heads, d, {}, detail::normal_vector(rng, heads * tokens)}));
  else if (label == "grape_ap_relative")
    body(grape_ap_relative::make({heads, d, 8, 1e-6, detail::normal_vector(rng, heads * tokens * 8)}));
  else
    body(grape_m_contextual::make(
        {heads, d, heads, {}, grape_m_contextual::cumulative_phases(rng, heads, tokens, 0.0, 0.0)}));
}

/// One sequence of `len` cached tokens, 32 query heads on 8 KV heads of 128 channels, NHD pages of
/// 16 slots in shuffled order; storage T.
template <class T>
void decode_case(benchmark::State& state, const std::string& name, std::int64_t len, int threads) {
  const std::int64_t kv_heads = 8, heads = 32, d = 128, block_size = 16, blocks = (len + block_size - 1) / block_size;
  std::vector<T> k(static_cast<std::size_t>(blocks * block_size * kv_heads * d), T(0.01f)), v(k.size(), T(0.02f));
  std::vector<T> q(static_cast<std::size_t>(heads * d), T(0.1f)), out(q.size());
  std::vector<std::int32_t> table(static_cast<std::size_t>(blocks));
  for (std::int64_t i = 0; i < blocks; ++i) table[i] = static_cast<std::int32_t>((i * 7919) % blocks);  // scattered
  const std::int64_t page = block_size * kv_heads * d, size = static_cast<std::int64_t>(k.size());
  cpu::decode_args a;
  a.type = std::is_same_v<T, float> ? cpu::dtype::f32 : cpu::dtype::bf16;
  a.q = q.data();
  a.batch = 1;
  a.q_heads = heads;
  a.kv_heads = kv_heads;
  a.k = {k.data(), size, page, kv_heads * d, d};
  a.v = {v.data(), size, page, kv_heads * d, d};
  a.blocks = a.max_blocks = blocks;
  a.block_size = block_size;
  a.block_table = table.data();
  a.seq_lens = &len;
  a.out = out.data();
  a.threads = threads;
  std::vector<T> copy_to(2 * k.size());
  const auto inst = rope::make(with_heads<rope>(rope::default_params(), heads));
  std::vector<double> ratio;
  for (auto _ : state) {
    const double t_copy = seconds([&] {
#pragma omp parallel for num_threads(threads)
      for (int part = 0; part < 2; ++part) {
        const std::vector<T>& from = part == 0 ? k : v;
        std::copy(from.begin(), from.end(), copy_to.begin() + part * static_cast<std::ptrdiff_t>(k.size()));
      }
    });
    const double t_decode = seconds([&] { cpu::attention_decode(inst, a); });
    state.SetIterationTime(t_decode);
    ratio.push_back(t_copy / t_decode);
  }
  state.counters["ratio_to_copy"] = median(ratio);
  fmt::print("case: {} ratio_to_copy: {:.3f}\n", name, median(ratio));
}


/// The straightforward attention an eager framework runs: the encoding applied on its own (Q and
/// K rotated into copies by cpu::rotate_qk; a bias written into the scores, ALiBi's by its fast
/// whole-tile add), every score of every head materialized (`scores`: [H, T, T] float32), a
/// softmax by rows, then P·V, through Eigen's GEMM with the same threads.
template <class Instance>
void materialized_attention(const Instance& inst, const problem& p, std::vector<float>& scores, std::vector<float>& out) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using strided = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
  const std::int64_t T = p.tokens, H = p.heads, d = p.d;
  Eigen::setNbThreads(p.threads);
  std::vector<float> q = p.q, k = p.k;
  if constexpr (requires { inst.rep; }) {
    cpu::rotate_qk_args r = cpu::rotation_of(p.args.qk);
    r.q.in = r.q.out = q.data();
    r.k.in = r.k.out = k.data();
    cpu::rotate_qk(inst, r);
  }
  std::vector<std::int64_t> positions(static_cast<std::size_t>(T));
  for (std::int64_t i = 0; i < T; ++i) positions[i] = i;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d)), minus_inf = -INFINITY;
  for (std::int64_t h = 0; h < H; ++h) {
    Eigen::Map<mat> S(scores.data() + h * T * T, T, T);
    const strided Q(q.data() + h * d, T, d, Eigen::OuterStride<>(H * d));
    const strided K(k.data() + h * d, T, d, Eigen::OuterStride<>(H * d));
    const strided V(p.v.data() + h * d, T, d, Eigen::OuterStride<>(H * d));
    S.noalias() = scale * (Q * K.transpose());
    if constexpr (requires { inst.bias; })
      inst.bias.add_tile(static_cast<int>(h), positions.data(), T, positions.data(), T, S.data(), T);
#pragma omp parallel for num_threads(p.threads)
    for (std::int64_t i = 0; i < T; ++i) {
      auto row = S.row(i).array();
      if (p.causal) row.tail(T - 1 - i) = minus_inf;
      row = (row - row.maxCoeff()).exp();
      row /= row.sum();
    }
    Eigen::Map<mat, 0, Eigen::OuterStride<>> O(out.data() + h * d, T, d, Eigen::OuterStride<>(H * d));
    O.noalias() = S * V;
  }
}

/// Peak resident memory (KiB) of one run of `what` ("fused" or "materialized") for a case, each in a
/// fresh process (this program again, --grape_peak=…): ru_maxrss after the run, and before it
/// (inputs allocated). Only the fused kernel must not grow with T².
struct peak_rss {
  long before_kib = 0, after_kib = 0;
};

peak_rss measure_peak(const std::string& label, std::int64_t tokens, bool causal, const char* what) {
  const std::string cmd = fmt::format("/proc/{}/exe --grape_peak={},{},{},{}", getpid(), label, tokens, causal ? 1 : 0, what);
  peak_rss r;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    if (std::fscanf(f, "peak_rss_kib: %ld %ld", &r.before_kib, &r.after_kib) != 2) r = {};
    pclose(f);
  }
  return r;
}

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

template <class Instance>
void run_once_for_peak(const Instance& inst, std::int64_t tokens, bool causal, const std::string& what) {
  problem p(tokens, 8, 8, 128, causal, 2);
  const long before = max_rss_kib();
  if (what == "fused") {
    cpu::attention(inst, p.args);
  } else {
    std::vector<float> scores(static_cast<std::size_t>(p.heads * tokens * tokens));
    materialized_attention(inst, p, scores, p.out);
  }
  std::printf("peak_rss_kib: %ld %ld\n", before, max_rss_kib());
}

template <class Instance>
void materialized_case(benchmark::State& state, const std::string& name, const std::string& label, const Instance& inst,
                       std::int64_t tokens, bool causal) {
  problem p(tokens, 8, 8, 128, causal, 2);
  std::vector<float> scores(static_cast<std::size_t>(p.heads * tokens * tokens)), out(p.out.size());
  std::vector<double> speedup;
  float worst = 0;
  for (auto _ : state) {
    const double t_fused = seconds([&] { cpu::attention(inst, p.args); });
    const double t_materialized = seconds([&] { materialized_attention(inst, p, scores, out); });
    state.SetIterationTime(t_fused);
    speedup.push_back(t_materialized / t_fused);
    for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - p.out[i]));
  }
  const peak_rss fused = measure_peak(label, tokens, causal, "fused");
  const peak_rss dense = measure_peak(label, tokens, causal, "materialized");
  const auto mib = [](long kib) { return static_cast<double>(kib) / 1024.0; };
  state.counters["speedup_over_materialized"] = median(speedup);
  fmt::print("case: {} speedup_over_materialized: {:.2f} peak_MiB_fused: {:.0f} peak_MiB_materialized: {:.0f} "
             "inputs_MiB: {:.0f} max_abs_difference: {:.1e}\n",
             name, median(speedup), mib(fused.after_kib), mib(dense.after_kib), mib(fused.before_kib), worst);
}

/// The instance a materialized case (and its --grape_peak child) runs: RoPE or ALiBi, 8 heads of 128.
template <class Body>
void with_materialized_instance(const std::string& label, Body&& body) {
  if (label == "rope") body(rope::make(with_heads<rope>(rope::default_params(), 8)));
  else body(alibi::make(with_heads<alibi>(alibi::default_params(), 8)));
}

template <class E>
void register_backward(const char* label) {
  for (const bool causal : {false, true}) {
    const std::string name = fmt::format("{}/T2048/H8/D128/{}/threads2/backward", label, causal ? "causal" : "full");
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
      backward_case(s, name, E::make(with_heads<E>(E::default_params(), 8)), causal, 2);
    })->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
  }
}

template <class E>
void register_encoding(const char* label, std::int64_t tokens = 2048) {
  for (const bool causal : {false, true})
    for (const int threads : {1, 2}) {
      const std::string name =
          fmt::format("{}/T{}/H8/D128/{}/threads{}", label, tokens, causal ? "causal" : "full", threads);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
        const auto inst = E::make(with_heads<E>(E::default_params(), 8));
        bench_attention(s, name, inst, causal, threads, 8, 8, tokens);
      })->UseManualTime()->Iterations(tokens > 2048 ? 2 : 3)->Unit(benchmark::kMillisecond);
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]).starts_with("--grape_peak=")) {  // a child of measure_peak
    char label[16], what[16];
    long tokens = 0;
    int causal = 0;
    if (std::sscanf(argv[1], "--grape_peak=%15[^,],%ld,%d,%15s", label, &tokens, &causal, what) != 4) return 2;
    with_materialized_instance(label, [&](const auto& inst) { run_once_for_peak(inst, tokens, causal != 0, what); });
    return 0;
  }
  register_encoding<rope>("rope");
  register_encoding<alibi>("alibi");
  register_encoding<t5_buckets>("t5");
  register_encoding<grape_a>("grape_a");
  register_encoding<rope_alibi>("rope_alibi");
  register_encoding<rope>("rope", 8192);
  for (const int head_dim : {64, 256})  // the same kernel at other head dims (no specialisation)
    for (const int threads : {1, 2}) {
      const std::string name = fmt::format("rope/T2048/H8/D{}/full/threads{}", head_dim, threads);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
        const auto inst = rope::make(with_heads<rope>(rope::default_params(), 8, head_dim));
        bench_attention(s, name, inst, false, threads, 8, 8, 2048, head_dim);
      })->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
    }
  for (const int threads : {1, 2}) {  // FoX is causal: its bias is −∞ above the diagonal
    const std::string name = fmt::format("fox/T2048/H8/D128/causal/threads{}", threads);
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
      std::mt19937_64 rng(7);
      std::normal_distribution<double> logit(4.0, 1.0);  // gates σ(z) near 1, as trained models have
      std::vector<double> gate_logits(8 * 2048);
      for (double& z : gate_logits) z = logit(rng);
      bench_attention(s, name, fox::make({8, 128, gate_logits}), true, threads, 8, 8);
    })->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
  }
  for (const bool backward : {false, true})
    for (const char* label : {"rope", "alibi", "t5"})
      for (const bool causal : {false, true})
        for (const int threads : {1, 2}) {
          const std::string name = fmt::format("{}/T2048/H8/D128/{}/threads{}/bf16{}", label, causal ? "causal" : "full",
                                               threads, backward ? "/forward_backward" : "");
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
            const std::string l = label;
            if (l == "t5")
              bf16_case(s, name, t5_buckets::make(with_heads<t5_buckets>(t5_buckets::default_params(), 8)), causal,
                        threads, backward);
            else
              with_materialized_instance(l, [&](const auto& inst) { bf16_case(s, name, inst, causal, threads, backward); });
          })->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
        }
  register_backward<rope>("rope");
  register_backward<alibi>("alibi");
  for (const char* label : {"grape_a_key_gated", "grape_ap_relative", "grape_m_contextual"}) {  // causal models
    for (const int threads : {1, 2}) {
      const std::string name = fmt::format("{}/T2048/H8/D128/causal/threads{}", label, threads);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
        with_paper_instance(label, [&](const auto& inst) { bench_attention(s, name, inst, true, threads, 8, 8); });
      })->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
    }
    const std::string name = fmt::format("{}/T2048/H8/D128/causal/threads2/backward_with_params", label);
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
      with_paper_instance(label, [&](const auto& inst) { backward_case(s, name, inst, true, 2, true); });
    })->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("plain/T2048/H32/KV8/D128/full/threads2", [](benchmark::State& s) {
    bench_attention(s, "plain/T2048/H32/KV8/D128/full/threads2", cpu::no_encoding{128}, false, 2, 32, 8);
  })->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
  for (const std::int64_t tokens : {2048, 8192})
    for (const char* label : {"rope", "alibi"})
      for (const bool causal : {false, true}) {
        const std::string name =
            fmt::format("materialized/{}/T{}/H8/D128/{}/threads2", label, tokens, causal ? "causal" : "full");
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
          with_materialized_instance(label, [&](const auto& inst) {
            materialized_case(s, name, label, inst, tokens, causal);
          });
        })->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
      }
  for (const std::int64_t len : {4096, 16384, 65536})
    for (const bool bf16 : {false, true}) {
      const std::string name = fmt::format("decode/rope/{}k/H32/KV8/D128/{}/threads2", len / 1024, bf16 ? "bf16" : "f32");
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
        if (bf16) decode_case<Eigen::bfloat16>(s, name, len, 2);
        else decode_case<float>(s, name, len, 2);
      })->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);
    }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
