// RoPE on Q and K (32 heads × 128 each, [tokens, heads, dim]): throughput of rotate_qk as a
// fraction of a memory baseline with the same traffic, measured back to back in every iteration
// in alternating order (in place: a pass scaling every element of the same buffers; out of place:
// a copy into separate buffers of the same size); the ratio is the median over iterations of
// baseline time / kernel time. Out of place also reports (counter only) the ratio to a copy with
// non-temporal stores. And the speedup over a textbook implementation
// (q·cos + rotate_half(q)·sin with full-size temporaries). Ends with one line per case:
//   case: NAME ratio_to_baseline: X [speedup_vs_textbook: Y]
// Quick mode (GRAPE_BENCH_QUICK=1 or --quick): 4096 tokens only.
#include <benchmark/benchmark.h>
#include <fmt/core.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "cpu/storage_io.hpp"
#include "cpu/stream_store.hpp"

namespace {

using grape::cpu::dtype;
using grape::math::layout_kind;
using clock_type = std::chrono::steady_clock;

constexpr std::int64_t heads = 32;
constexpr int head_dim = 128;
constexpr std::int64_t row = heads * head_dim;  // elements per token per tensor

struct aligned_free {
  void operator()(void* p) const { std::free(p); }
};
using buffer = std::unique_ptr<unsigned char, aligned_free>;

buffer make_buffer(std::size_t bytes) {
  return buffer(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
}

std::size_t type_bytes(dtype t) { return t == dtype::f32 ? 4 : 2; }

/// Buffers of one (dtype, tokens) size, shared by all cases of that size.
struct workspace {
  dtype type;
  std::int64_t tokens;
  buffer q, k, q_out, k_out, tmp_a, tmp_b;
  std::vector<std::int64_t> positions;
  std::vector<float> cos_full, sin_full;  // textbook: [tokens, head_dim]
  std::size_t bytes() const { return static_cast<std::size_t>(tokens * row) * type_bytes(type); }
};

template <class T>
void fill(unsigned char* p, std::int64_t n, std::uint32_t seed) {
  T* x = reinterpret_cast<T*>(p);
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i)
    x[i] = static_cast<T>(static_cast<float>((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f);
}

workspace& workspace_for(dtype type, std::int64_t tokens) {
  static std::map<std::pair<int, std::int64_t>, std::unique_ptr<workspace>> all;
  auto& w = all[{static_cast<int>(type), tokens}];
  if (w) return *w;
  // Keep at most one size alive: the large sizes do not fit together.
  for (auto& [key, other] : all)
    if (other && other.get() != w.get()) other.reset();
  w = std::make_unique<workspace>();
  w->type = type;
  w->tokens = tokens;
  const std::size_t b = static_cast<std::size_t>(tokens * row) * type_bytes(type);
  for (buffer* x : {&w->q, &w->k, &w->q_out, &w->k_out, &w->tmp_a, &w->tmp_b}) *x = make_buffer(b);
  for (unsigned char* x : {w->q.get(), w->k.get(), w->q_out.get(), w->k_out.get(), w->tmp_a.get(), w->tmp_b.get()}) {
    if (type == dtype::f32) fill<float>(x, tokens * row, 1);
    else fill<Eigen::bfloat16>(x, tokens * row, 2);
  }
  w->positions.resize(tokens);
  for (std::int64_t t = 0; t < tokens; ++t) w->positions[t] = t;
  w->cos_full.resize(tokens * head_dim);
  w->sin_full.resize(tokens * head_dim);
  return *w;
}

grape::rotary_spec spec_for(layout_kind layout) {
  grape::rotary_spec s;
  s.head_dim = s.rotary_dim = head_dim;
  s.layout = layout;
  for (int i = 0; i < head_dim / 2; ++i) s.inv_freq.push_back(std::pow(500000.0, -2.0 * i / head_dim));
  return s;
}

volatile float runtime_one = 1.0f;  // the baseline's scale: not foldable by the compiler

template <class T>
void scale_in_place(workspace& w, int threads) {
  // Through the kernel's own widen/narrow helpers, so that the bf16 conversions cost the same.
  const float s = runtime_one;
  T* q = reinterpret_cast<T*>(w.q.get());
  T* k = reinterpret_cast<T*>(w.k.get());
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < w.tokens; ++t)
    for (T* x : {q + t * row, k + t * row}) {
      if constexpr (std::is_same_v<T, float>) {
#pragma omp simd
        for (std::int64_t i = 0; i < row; ++i) x[i] *= s;
      } else {
        for (std::int64_t c = 0; c < row; c += head_dim) {
          alignas(64) float buf[head_dim];
          grape::cpu::detail::widen<T, head_dim>(x + c, buf);
#pragma omp simd
          for (int i = 0; i < head_dim; ++i) buf[i] *= s;
          grape::cpu::detail::narrow<T, head_dim>(buf, x + c);
        }
      }
    }
}

void copy_out(workspace& w, int threads) {
  const std::size_t rb = row * type_bytes(w.type);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < w.tokens; ++t) {
    std::memcpy(w.q_out.get() + t * rb, w.q.get() + t * rb, rb);
    std::memcpy(w.k_out.get() + t * rb, w.k.get() + t * rb, rb);
  }
}

/// A copy with non-temporal stores (the destination is not read first): the floor for an
/// out-of-place kernel that streams its output.
void stream_copy_out(workspace& w, int threads) {
  const std::size_t rb = row * type_bytes(w.type);
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < w.tokens; ++t) {
      grape::cpu::detail::stream_lines(w.q.get() + t * rb, w.q_out.get() + t * rb, rb);
      grape::cpu::detail::stream_lines(w.k.get() + t * rb, w.k_out.get() + t * rb, rb);
    }
    grape::cpu::detail::stream_fence();
  }
}

/// The textbook form (Hugging Face apply_rotary_pos_emb): cos/sin gathered to [tokens, dim],
/// then out = q·cos + rotate_half(q)·sin as separate full-tensor passes with temporaries.
template <class T>
void textbook(workspace& w, const grape::cpu::rotary_cache& cache, layout_kind layout, int threads) {
  const int half = head_dim / 2;
  const std::int64_t n = w.tokens;
  float* cf = w.cos_full.data();
  float* sf = w.sin_full.data();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < n; ++t)
    for (int c = 0; c < head_dim; ++c) {
      const int i = layout == layout_kind::half_split ? c % half : c / 2;
      cf[t * head_dim + c] = cache.rows[w.positions[t] * head_dim + i];
      sf[t * head_dim + c] = cache.rows[w.positions[t] * head_dim + half + i];
    }
  for (int which = 0; which < 2; ++which) {
    const T* x = reinterpret_cast<const T*>(which == 0 ? w.q.get() : w.k.get());
    T* out = reinterpret_cast<T*>(which == 0 ? w.q_out.get() : w.k_out.get());
    T* a = reinterpret_cast<T*>(w.tmp_a.get());
    T* b = reinterpret_cast<T*>(w.tmp_b.get());
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(static)
      for (std::int64_t e = 0; e < n * row; ++e)  // a = x * cos
        a[e] = static_cast<T>(static_cast<float>(x[e]) * cf[(e / row) * head_dim + e % head_dim]);
#pragma omp for schedule(static)
      for (std::int64_t e = 0; e < n * row; ++e) {  // b = rotate_half(x)
        const std::int64_t c = e % head_dim, base = e - c;
        if (layout == layout_kind::half_split)
          b[e] = c < half ? static_cast<T>(-static_cast<float>(x[base + c + half])) : x[base + c - half];
        else
          b[e] = c % 2 == 0 ? static_cast<T>(-static_cast<float>(x[e + 1])) : x[e - 1];
      }
#pragma omp for schedule(static)
      for (std::int64_t e = 0; e < n * row; ++e)  // b = b * sin
        b[e] = static_cast<T>(static_cast<float>(b[e]) * sf[(e / row) * head_dim + e % head_dim]);
#pragma omp for schedule(static)
      for (std::int64_t e = 0; e < n * row; ++e)  // out = a + b
        out[e] = static_cast<T>(static_cast<float>(a[e]) + static_cast<float>(b[e]));
    }
  }
}

struct case_desc {
  dtype type;
  layout_kind layout;
  bool inplace;
  int threads;
  bool cached;
  std::int64_t tokens;
  std::string name() const {
    return fmt::format("rope_{}_{}_{}_threads{}_{}_tokens{}", type == dtype::f32 ? "f32" : "bf16",
                       layout == layout_kind::half_split ? "halfsplit" : "interleaved",
                       inplace ? "inplace" : "outofplace", threads, cached ? "cached" : "onthefly",
                       tokens);
  }
};

struct case_result {
  double kernel = 1e30, baseline = 1e30, textbook = 1e30, stream_copy = 1e30;  // best seconds
  std::vector<double> paired;  // baseline / kernel of each iteration (measured back to back)
  double ratio() const {
    std::vector<double> r = paired;
    std::sort(r.begin(), r.end());
    const std::size_t n = r.size();
    return n == 0 ? 0.0 : n % 2 == 1 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
  }
};
std::map<std::string, case_result>& results() {
  static std::map<std::string, case_result> r;
  return r;
}

double seconds(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void run_case(benchmark::State& state, case_desc c) {
  workspace& w = workspace_for(c.type, c.tokens);
  const grape::rotary_spec spec = spec_for(c.layout);
  static std::map<std::pair<int, std::int64_t>, grape::cpu::rotary_cache> caches;
  auto& cache = caches[{static_cast<int>(c.layout), c.tokens}];
  if (cache.rows.empty()) cache = grape::cpu::rotary_cache::build(spec, c.tokens);
  grape::cpu::rotate_qk_args args;
  args.type = c.type;
  args.q = {w.q.get(), c.inplace ? w.q.get() : w.q_out.get(), heads, c.tokens * row, 0, row, head_dim};
  args.k = {w.k.get(), c.inplace ? w.k.get() : w.k_out.get(), heads, c.tokens * row, 0, row, head_dim};
  args.seq_len = c.tokens;
  args.position_ids = w.positions.data();
  args.cache = c.cached ? &cache : nullptr;
  args.threads = c.threads;
  case_result& r = results()[c.name()];
  const bool with_textbook = !c.inplace;
  bool kernel_first = false;
  for (auto _ : state) {
    // Baseline and kernel back to back, in alternating order (so neither always runs on the
    // cache state the other leaves), and their ratio kept per iteration.
    const auto run_baseline = [&] {
      const auto t0 = clock_type::now();
      if (!c.inplace) copy_out(w, c.threads);
      else if (c.type == dtype::f32) scale_in_place<float>(w, c.threads);
      else scale_in_place<Eigen::bfloat16>(w, c.threads);
      return seconds(t0, clock_type::now());
    };
    const auto run_kernel = [&] {
      const auto t0 = clock_type::now();
      grape::cpu::rotate_qk(spec, args);
      return seconds(t0, clock_type::now());
    };
    double baseline = 0, kernel = 0;
    if (kernel_first) {
      kernel = run_kernel();
      baseline = run_baseline();
    } else {
      baseline = run_baseline();
      kernel = run_kernel();
    }
    kernel_first = !kernel_first;
    r.baseline = std::min(r.baseline, baseline);
    r.kernel = std::min(r.kernel, kernel);
    r.paired.push_back(baseline / kernel);
    if (!c.inplace) {
      const auto t3 = clock_type::now();
      stream_copy_out(w, c.threads);
      r.stream_copy = std::min(r.stream_copy, seconds(t3, clock_type::now()));
    }
    if (with_textbook) {
      const auto t3 = clock_type::now();
      if (c.type == dtype::f32) textbook<float>(w, cache, c.layout, c.threads);
      else textbook<Eigen::bfloat16>(w, cache, c.layout, c.threads);
      r.textbook = std::min(r.textbook, seconds(t3, clock_type::now()));
    }
    state.SetIterationTime(kernel);
  }
  const double traffic = 2.0 * 2.0 * static_cast<double>(w.bytes());  // Q and K, read + write
  state.SetBytesProcessed(static_cast<std::int64_t>(traffic) * state.iterations());
  state.counters["ratio_to_baseline"] = r.ratio();
  if (with_textbook) state.counters["speedup_vs_textbook"] = r.textbook / r.kernel;
  if (!c.inplace) state.counters["ratio_to_streaming_copy"] = r.stream_copy / r.kernel;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = std::getenv("GRAPE_BENCH_QUICK") != nullptr &&
               std::string(std::getenv("GRAPE_BENCH_QUICK")) != "0";
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") quick = true;
    else args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());

  std::vector<std::int64_t> sizes = quick ? std::vector<std::int64_t>{4096}
                                          : std::vector<std::int64_t>{4096, 16384, 65536};
  std::vector<case_desc> cases;
  for (std::int64_t tokens : sizes)
    for (dtype type : {dtype::f32, dtype::bf16})
      for (layout_kind layout : {layout_kind::half_split, layout_kind::interleaved})
        for (bool inplace : {true, false})
          for (int threads : {1, 2})
            for (bool cached : {false, true})
              cases.push_back({type, layout, inplace, threads, cached, tokens});
  for (const case_desc& c : cases)
    benchmark::RegisterBenchmark(c.name().c_str(), [c](benchmark::State& s) { run_case(s, c); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(quick ? 0.1 : 0.4);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  for (const case_desc& c : cases) {
    const auto it = results().find(c.name());
    if (it == results().end()) continue;  // filtered out
    const case_result& r = it->second;
    std::string line = fmt::format("case: {} ratio_to_baseline: {:.3f}", c.name(), r.ratio());
    if (!c.inplace) line += fmt::format(" speedup_vs_textbook: {:.2f}", r.textbook / r.kernel);
    fmt::print("{}\n", line);
  }
  return 0;
}
