// RoPE on Q and K (32 heads × 128 each, [tokens, heads, dim]): throughput of rotate_qk as a
// fraction of a memory baseline with the same traffic (in place: a pass scaling every element of
// the same buffers; out of place: a copy into separate buffers of the same size), measured back to
// back in every iteration in alternating order; a case's ratio is the median over its iterations
// of baseline time / kernel time. Out of place also reports (counter only) the ratio to a copy
// with non-temporal stores, and the speedup over a textbook implementation
// (q·cos + rotate_half(q)·sin with full-size temporaries).
//
// Schedule: the cases of one size run in rounds; every round visits all of them once, in an
// order shuffled with a fixed seed, for a few iterations each. So a case's iterations are spread
// over the whole time its size runs, and a stretch of contention on this shared machine lowers
// every case a little instead of one case a lot (docs/performance.md).
//
// Also every other representation through cpu::rotate_qk(instance, args)
// (representation_workloads.hpp) against the in-place pass, and the fused QK-norm + RoPE + KV-cache write (fused_workloads.hpp) against its same-traffic
// baseline, with its speedup over the same work in separate passes. And the score-bias tiles of
// ALiBi and the GRAPE paper's biases (bias_workloads.hpp) against a fill of the same tile.
//
// Ends with the spread of every case, the target check, and one line per case:
//   case: NAME ratio_to_baseline: X [speedup_vs_textbook: Y] [speedup_vs_unfused: Z]
// Quick mode (GRAPE_BENCH_QUICK=1 or --quick): 4096 tokens only, fewer rounds.
// GRAPE_BENCH_ROUNDS / GRAPE_BENCH_PAIRS override the rounds and the iterations per round.
#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bias_workloads.hpp"
#include "fused_workloads.hpp"
#include "paired_ratio.hpp"
#include "representation_workloads.hpp"
#include "rope_workloads.hpp"

namespace grape_bench {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct case_desc {
  dtype type;
  layout_kind layout;
  bool inplace;
  int threads;
  bool cached;
  std::int64_t tokens;
  bool fused = false;  // QK-norm + RoPE + KV-cache write (fused_workloads.hpp)
  std::string representation;  // non-empty: representation_workloads.hpp (f32 in place)
  std::string bias;            // non-empty: bias_workloads.hpp (bias_tokens, in the rounds of `tokens`)
  std::string name() const {
    if (!bias.empty()) return fmt::format("bias_{}_threads{}_tokens{}", bias, threads, bias_tokens);
    if (!representation.empty())
      return fmt::format("representation_{}_f32_inplace_threads{}_tokens{}", representation, threads, tokens);
    if (fused)
      return fmt::format("fused_qknorm_kvcache_{}_{}_threads{}_{}_tokens{}",
                         type == dtype::f32 ? "f32" : "bf16",
                         layout == layout_kind::half_split ? "halfsplit" : "interleaved", threads,
                         cached ? "cached" : "onthefly", tokens);
    return fmt::format("rope_{}_{}_{}_threads{}_{}_tokens{}", type == dtype::f32 ? "f32" : "bf16",
                       layout == layout_kind::half_split ? "halfsplit" : "interleaved",
                       inplace ? "inplace" : "outofplace", threads, cached ? "cached" : "onthefly",
                       tokens);
  }
  /// The target: f32 half-split in place, ratio >= 0.9 (both threads, both paths).
  bool target() const {
    return !fused && representation.empty() && bias.empty() && type == dtype::f32 && layout == layout_kind::half_split && inplace;
  }
};

std::map<std::string, case_result>& results() {
  static std::map<std::string, case_result> r;
  return r;
}

const grape::cpu::rotary_cache& cache_for(layout_kind layout, std::int64_t tokens) {
  static std::map<std::pair<int, std::int64_t>, grape::cpu::rotary_cache> caches;
  auto& cache = caches[{static_cast<int>(layout), tokens}];
  if (cache.rows.empty()) cache = grape::cpu::rotary_cache::build(spec_for(layout), tokens);
  return cache;
}

/// Times `run_baseline` and `run_kernel` back to back in alternating order for each of `state`'s
/// iterations; records the pairs in r and returns this round's pairs.
template <class Baseline, class Kernel>
std::vector<double> time_pairs(benchmark::State& state, case_result& r, Baseline&& run_baseline,
                               Kernel&& run_kernel, const std::function<void(double)>& after) {
  std::vector<double> round_pairs;
  bool kernel_first = r.paired.size() % 2 == 1;
  for (auto _ : state) {
    // Alternating order, so that neither always runs on the cache state the other leaves.
    double baseline = 0, kernel = 0;
    if (kernel_first) {
      kernel = run_kernel();
      baseline = run_baseline();
    } else {
      baseline = run_baseline();
      kernel = run_kernel();
    }
    kernel_first = !kernel_first;
    r.best_baseline = std::min(r.best_baseline, baseline);
    r.best_kernel = std::min(r.best_kernel, kernel);
    r.paired.push_back(baseline / kernel);
    round_pairs.push_back(baseline / kernel);
    after(kernel);
    state.SetIterationTime(kernel);
  }
  return round_pairs;
}

template <class F>
double timed(F&& f) {
  const auto t0 = clock_type::now();
  f();
  return seconds(t0, clock_type::now());
}

/// One round of a fused case: the fused call against its same-traffic baseline; `extras`: the
/// unfused passes once.
void run_fused_round(benchmark::State& state, const case_desc& c, bool extras) {
  fused_workspace& w = fused_workspace_for(c.type, c.tokens);
  const grape::rotary_spec spec = spec_for(c.layout);
  grape::cpu::qk_rms_norm norm;
  grape::cpu::kv_cache_write kv;
  const grape::cpu::rotate_qk_args args = fused_args(w, c.threads, norm, kv);
  case_result& r = results()[c.name()];
  const bool f32 = c.type == dtype::f32;
  const auto round_pairs = time_pairs(
      state, r,
      [&] { return timed([&] { f32 ? fused_baseline<float>(w, c.threads) : fused_baseline<Eigen::bfloat16>(w, c.threads); }); },
      [&] { return timed([&] { grape::cpu::rotate_qk(spec, args); }); },
      [&](double) {
        if (!extras) return;
        extras = false;
        r.best_unfused = std::min(r.best_unfused, timed([&] {
          f32 ? unfused<float>(w, spec, c.threads) : unfused<Eigen::bfloat16>(w, spec, c.threads);
        }));
      });
  state.SetBytesProcessed(static_cast<std::int64_t>(w.traffic()) * state.iterations());
  state.counters["round_ratio"] = quantile(round_pairs, 0.5);
  state.counters["ratio_so_far"] = r.ratio();
  if (r.best_unfused < 1e30) state.counters["speedup_vs_unfused"] = r.best_unfused / r.best_kernel;
}

/// One round of a representation case: the instance call against the in-place memory pass (the
/// lift: against the copy into its lifted buffers).
void run_representation_round(benchmark::State& state, const case_desc& c) {
  workspace& w = workspace_for(dtype::f32, c.tokens);
  grape::cpu::rotate_qk_args args;
  args.q = {w.q.get(), w.q.get(), heads, c.tokens * row, 0, row, head_dim};
  args.k = {w.k.get(), w.k.get(), heads, c.tokens * row, 0, row, head_dim};
  args.seq_len = c.tokens;
  args.threads = c.threads;
  case_result& r = results()[c.name()];
  std::vector<double> round_pairs;
  std::size_t bytes = 4 * w.bytes();  // in place: Q and K read and written
  if (is_lift(c.representation)) {    // reads Q and K, writes the lifted copies
    lifted_buffers& b = lifted_for(c.tokens);
    const auto* q = reinterpret_cast<const float*>(w.q.get());
    const auto* k = reinterpret_cast<const float*>(w.k.get());
    round_pairs = time_pairs(
        state, r, [&] { return timed([&] { lift_baseline(q, k, b, c.threads); }); },
        [&] { return timed([&] { run_lift(args, b); }); }, [](double) {});
    bytes = 2 * w.bytes() + b.bytes();
  } else {
    round_pairs = time_pairs(
        state, r, [&] { return timed([&] { scale_in_place<float>(w, c.threads); }); },
        [&] { return timed([&] { run_representation(c.representation, args); }); }, [](double) {});
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["round_ratio"] = quantile(round_pairs, 0.5);
  state.counters["ratio_so_far"] = r.ratio();
}

/// One round of a bias case: the tile against a fill of the same tile.
void run_bias_round(benchmark::State& state, const case_desc& c) {
  const grape::cpu::bias_tile tile = whole_tile(bias_tokens, c.threads);
  case_result& r = results()[c.name()];
  const auto round_pairs = time_pairs(
      state, r, [&] { return timed([&] { fill_tile(tile); }); },
      [&] { return timed([&] { run_bias(c.bias, tile); }); }, [](double) {});
  state.SetBytesProcessed(static_cast<std::int64_t>(tile.heads * tile.q_len * tile.k_len * 4) * state.iterations());
  state.counters["round_ratio"] = quantile(round_pairs, 0.5);
  state.counters["ratio_so_far"] = r.ratio();
}

/// One round of one case: `state`'s iterations, each a baseline/kernel pair (out of place, then a
/// streaming copy, for the secondary ratio). `extras`: also time the textbook form once (it is
/// slow, about 15–90× the kernel, and only feeds speedup_vs_textbook).
void run_round(benchmark::State& state, const case_desc& c, bool extras) {
  if (c.fused) return run_fused_round(state, c, extras);
  if (!c.representation.empty()) return run_representation_round(state, c);
  if (!c.bias.empty()) return run_bias_round(state, c);
  workspace& w = workspace_for(c.type, c.tokens);
  const grape::rotary_spec spec = spec_for(c.layout);
  const grape::cpu::rotary_cache& cache = cache_for(c.layout, c.tokens);
  grape::cpu::rotate_qk_args args;
  args.type = c.type;
  args.q = {w.q.get(), c.inplace ? w.q.get() : w.q_out.get(), heads, c.tokens * row, 0, row, head_dim};
  args.k = {w.k.get(), c.inplace ? w.k.get() : w.k_out.get(), heads, c.tokens * row, 0, row, head_dim};
  args.seq_len = c.tokens;
  args.position_ids = w.positions.data();
  args.cache = c.cached ? &cache : nullptr;
  args.threads = c.threads;
  case_result& r = results()[c.name()];
  const auto run_baseline = [&] {
    return timed([&] {
      if (!c.inplace) copy_out(w, c.threads);
      else if (c.type == dtype::f32) scale_in_place<float>(w, c.threads);
      else scale_in_place<Eigen::bfloat16>(w, c.threads);
    });
  };
  const auto run_kernel = [&] { return timed([&] { grape::cpu::rotate_qk(spec, args); }); };
  const auto round_pairs = time_pairs(state, r, run_baseline, run_kernel, [&](double kernel) {
    if (c.inplace) return;
    r.paired_streaming.push_back(timed([&] { stream_copy_out(w, c.threads); }) / kernel);
    if (!extras) return;
    extras = false;
    r.best_textbook = std::min(r.best_textbook, timed([&] {
      if (c.type == dtype::f32) textbook<float>(w, cache, c.layout, c.threads);
      else textbook<Eigen::bfloat16>(w, cache, c.layout, c.threads);
    }));
  });
  const double traffic = 2.0 * 2.0 * static_cast<double>(w.bytes());  // Q and K, read + write
  state.SetBytesProcessed(static_cast<std::int64_t>(traffic) * state.iterations());
  state.counters["round_ratio"] = quantile(round_pairs, 0.5);
  state.counters["ratio_so_far"] = r.ratio();
  if (!c.inplace) state.counters["ratio_to_streaming_copy"] = quantile(r.paired_streaming, 0.5);
  if (!c.inplace && r.best_textbook < 1e30)
    state.counters["speedup_vs_textbook"] = r.best_textbook / r.best_kernel;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

/// Iterations per round: about the same time per round at every size.
int pairs_per_round(std::int64_t tokens, bool quick) {
  if (quick) return 4;
  return tokens <= 4096 ? 8 : 4;
}

void print_summary(const std::vector<case_desc>& cases) {
  double worst_target = 1e30;
  int target_cases = 0;
  for (const case_desc& c : cases) {
    const auto it = results().find(c.name());
    if (it == results().end()) continue;  // filtered out
    const case_result& r = it->second;
    std::string line = fmt::format(
        "spread: {} pairs: {} lower_quartile: {:.3f} median: {:.3f} upper_quartile: {:.3f} "
        "best_over_best: {:.3f}",
        c.name(), r.paired.size(), r.lower_quartile(), r.ratio(), r.upper_quartile(),
        r.best_baseline / r.best_kernel);
    if (!c.inplace)
      line += fmt::format(" ratio_to_streaming_copy: {:.3f}", quantile(r.paired_streaming, 0.5));
    fmt::print("{}\n", line);
    if (c.target()) {
      worst_target = std::min(worst_target, r.ratio());
      ++target_cases;
    }
  }
  if (target_cases > 0)
    fmt::print("target: f32 half-split in place, ratio_to_baseline >= 0.9: {} ({} cases, lowest {:.3f})\n",
               worst_target >= 0.9 ? "met" : "NOT met", target_cases, worst_target);
  for (const case_desc& c : cases) {
    const auto it = results().find(c.name());
    if (it == results().end()) continue;
    const case_result& r = it->second;
    std::string line = fmt::format("case: {} ratio_to_baseline: {:.3f}", c.name(), r.ratio());
    if (!c.inplace && r.best_textbook < 1e30)
      line += fmt::format(" speedup_vs_textbook: {:.2f}", r.best_textbook / r.best_kernel);
    if (c.fused && r.best_unfused < 1e30)
      line += fmt::format(" speedup_vs_unfused: {:.2f}", r.best_unfused / r.best_kernel);
    fmt::print("{}\n", line);
  }
}

}  // namespace
}  // namespace grape_bench

int main(int argc, char** argv) {
  using namespace grape_bench;
  bool quick = std::getenv("GRAPE_BENCH_QUICK") != nullptr &&
               std::string(std::getenv("GRAPE_BENCH_QUICK")) != "0";
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") quick = true;
    else args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());

  const int rounds = env_int("GRAPE_BENCH_ROUNDS", quick ? 5 : 8);
  const std::vector<std::int64_t> sizes = quick ? std::vector<std::int64_t>{4096}
                                                : std::vector<std::int64_t>{4096, 16384, 65536};
  std::vector<case_desc> cases;
  for (std::int64_t tokens : sizes)
    for (dtype type : {dtype::f32, dtype::bf16})
      for (layout_kind layout : {layout_kind::half_split, layout_kind::interleaved})
        for (bool inplace : {true, false})
          for (int threads : {1, 2})
            for (bool cached : {false, true})
              cases.push_back({type, layout, inplace, threads, cached, tokens, false, {}, {}});
  // The fused QK-norm + RoPE + KV-cache write (Q in place, half-split, on the fly).
  for (std::int64_t tokens : sizes)
    for (dtype type : {dtype::f32, dtype::bf16})
      for (int threads : {1, 2})
        cases.push_back({type, layout_kind::half_split, true, threads, false, tokens, true, {}, {}});

  // Every representation through the instance road (f32 in place, the first size only).
  for (const std::string& rep : representation_names())
    for (int threads : {1, 2})
      cases.push_back({dtype::f32, layout_kind::half_split, true, threads, false, sizes.front(), false, rep, {}});

  // Every bias tile over the causal square of bias_tokens, in the first size's rounds.
  for (const std::string& bias : bias_names())
    for (int threads : {1, 2})
      cases.push_back({dtype::f32, layout_kind::half_split, true, threads, false, sizes.front(), false, {}, bias});

  // Registration order is run order: sizes in turn, and within a size `rounds` shuffled passes
  // over its cases (fixed seed: the same order in every run).
  std::mt19937 shuffle_rng(20261202);
  for (std::int64_t tokens : sizes) {
    std::vector<case_desc> of_size;
    for (const case_desc& c : cases)
      if (c.tokens == tokens) of_size.push_back(c);
    const int pairs = env_int("GRAPE_BENCH_PAIRS", pairs_per_round(tokens, quick));
    for (int round = 0; round < rounds; ++round) {
      std::shuffle(of_size.begin(), of_size.end(), shuffle_rng);
      const bool extras = round == 0 || round == rounds / 2;
      for (const case_desc& c : of_size)
        benchmark::RegisterBenchmark(fmt::format("{}/round:{}", c.name(), round).c_str(),
                                     [c, extras](benchmark::State& s) { run_round(s, c, extras); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->Iterations(pairs);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary(cases);
  return 0;
}
