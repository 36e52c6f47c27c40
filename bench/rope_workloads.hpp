#pragma once
// The workloads of grape-bench: Q/K buffers of one size, the memory baselines with the same
// traffic as the kernel (an in-place scale pass, a copy, a copy with streaming stores) and the
// textbook RoPE (q·cos + rotate_half(q)·sin with full-size temporaries).
#include <omp.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "cpu/storage_io.hpp"
#include "cpu/stream_store.hpp"

namespace grape_bench {

using grape::cpu::dtype;
using grape::math::layout_kind;

constexpr std::int64_t heads = 32;
constexpr int head_dim = 128;
constexpr std::int64_t row = heads * head_dim;  // elements per token per tensor

struct aligned_free {
  void operator()(void* p) const { std::free(p); }
};
using buffer = std::unique_ptr<unsigned char, aligned_free>;

inline buffer make_buffer(std::size_t bytes) {
  return buffer(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
}

inline std::size_t type_bytes(dtype t) { return t == dtype::f32 ? 4 : 2; }

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

/// The buffers of (type, tokens). Both dtypes of one size stay alive together (the cases of a
/// size run interleaved); other sizes are freed (65536 tokens: 9 GiB for the two dtypes).
inline workspace& workspace_for(dtype type, std::int64_t tokens) {
  static std::map<std::pair<int, std::int64_t>, std::unique_ptr<workspace>> all;
  for (auto& [key, other] : all)
    if (key.second != tokens) other.reset();
  auto& w = all[{static_cast<int>(type), tokens}];
  if (w) return *w;
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

inline grape::rotary_spec spec_for(layout_kind layout) {
  grape::rotary_spec s;
  s.head_dim = s.rotary_dim = head_dim;
  s.layout = layout;
  for (int i = 0; i < head_dim / 2; ++i) s.inv_freq.push_back(std::pow(500000.0, -2.0 * i / head_dim));
  return s;
}

inline volatile float runtime_one = 1.0f;  // the baseline's scale: not foldable by the compiler

/// Scales n elements (a multiple of head_dim) in place by s: the in-place baselines' pass.
/// Through the kernel's own widen/narrow helpers, so that the bf16 conversions cost the same.
/// Always inlined: the per-token loops then compile to the same code as when each baseline had
/// its own copy of this loop (the figures in performance.md were measured with that code).
template <class T>
[[gnu::always_inline]] inline void scale_row(T* x, std::int64_t n, float s) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
  } else {
    for (std::int64_t c = 0; c < n; c += head_dim) {
      alignas(64) float buf[head_dim];
      grape::cpu::detail::widen<T, head_dim>(x + c, buf);
#pragma omp simd
      for (int i = 0; i < head_dim; ++i) buf[i] *= s;
      grape::cpu::detail::narrow<T, head_dim>(buf, x + c);
    }
  }
}

template <class T>
void scale_in_place(workspace& w, int threads) {
  const float s = runtime_one;
  T* q = reinterpret_cast<T*>(w.q.get());
  T* k = reinterpret_cast<T*>(w.k.get());
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < w.tokens; ++t)
    for (T* x : {q + t * row, k + t * row}) scale_row(x, row, s);
}

inline void copy_out(workspace& w, int threads) {
  const std::size_t rb = row * type_bytes(w.type);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < w.tokens; ++t) {
    std::memcpy(w.q_out.get() + t * rb, w.q.get() + t * rb, rb);
    std::memcpy(w.k_out.get() + t * rb, w.k.get() + t * rb, rb);
  }
}

/// A copy with non-temporal stores (the destination is not read first): the floor for an
/// out-of-place kernel that streams its output.
inline void stream_copy_out(workspace& w, int threads) {
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

}  // namespace grape_bench
