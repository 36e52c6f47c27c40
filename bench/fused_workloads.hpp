#pragma once
// The fused workload of grape-bench: one attention layer's prefill in Qwen3-8B's shapes (32 query
// heads, 8 KV heads, head_dim 128, QK-norm with eps 1e-6) writing K and V into a paged cache (NHD
// pages of 16 slots, pages in shuffled order). Three ways to do the same work:
//   fused:     one rotate_qk call with qk_norm and kv_cache (Q in place, K and V to the cache);
//   unfused:   an RMSNorm pass over Q and K, rotate_qk in place, then K and V copied to the cache;
//   baseline:  the fused call's memory traffic and nothing else (scale Q in place, copy K and V
//              rows to their slots).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "cpu/storage_io.hpp"
#include "rope_workloads.hpp"

namespace grape_bench {

constexpr std::int64_t fused_q_heads = 32;
constexpr std::int64_t fused_kv_heads = 8;
constexpr std::int64_t fused_block_size = 16;
constexpr float fused_eps = 1e-6f;

struct fused_workspace {
  dtype type;
  std::int64_t tokens;
  buffer q, k, v, k_cache, v_cache;
  std::vector<std::int64_t> positions, slots;
  std::vector<float> q_weight, k_weight;
  std::int64_t q_row() const { return fused_q_heads * head_dim; }
  std::int64_t kv_row() const { return fused_kv_heads * head_dim; }
  /// Bytes the fused call must move: Q read and written, K and V read, both cache rows written.
  double traffic() const {
    return static_cast<double>(tokens) * static_cast<double>(2 * q_row() + 4 * kv_row()) *
           static_cast<double>(type_bytes(type));
  }
};

/// The buffers of (type, tokens); other sizes are freed, as in workspace_for.
inline fused_workspace& fused_workspace_for(dtype type, std::int64_t tokens) {
  static std::map<std::pair<int, std::int64_t>, std::unique_ptr<fused_workspace>> all;
  for (auto& [key, other] : all)
    if (key.second != tokens) other.reset();
  auto& w = all[{static_cast<int>(type), tokens}];
  if (w) return *w;
  w = std::make_unique<fused_workspace>();
  w->type = type;
  w->tokens = tokens;
  const std::size_t eb = type_bytes(type);
  const auto elements = [&](std::int64_t per_token) { return static_cast<std::size_t>(tokens * per_token); };
  w->q = make_buffer(elements(w->q_row()) * eb);
  for (buffer* b : {&w->k, &w->v, &w->k_cache, &w->v_cache}) *b = make_buffer(elements(w->kv_row()) * eb);
  std::uint32_t seed = 3;
  for (unsigned char* b : {w->q.get(), w->k.get(), w->v.get(), w->k_cache.get(), w->v_cache.get()}) {
    const std::int64_t n = static_cast<std::int64_t>(b == w->q.get() ? elements(w->q_row()) : elements(w->kv_row()));
    if (type == dtype::f32) fill<float>(b, n, seed++);
    else fill<Eigen::bfloat16>(b, n, seed++);
  }
  w->positions.resize(tokens);
  std::iota(w->positions.begin(), w->positions.end(), 0);
  std::vector<std::int64_t> pages((tokens + fused_block_size - 1) / fused_block_size);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(7));
  w->slots.resize(tokens);
  for (std::int64_t t = 0; t < tokens; ++t)
    w->slots[t] = pages[t / fused_block_size] * fused_block_size + t % fused_block_size;
  for (int c = 0; c < head_dim; ++c) {
    w->q_weight.push_back(1.0f + 0.01f * static_cast<float>(c % 7));
    w->k_weight.push_back(1.0f - 0.01f * static_cast<float>(c % 5));
  }
  return *w;
}

/// Arguments of the fused call (pointers into w and into the two structs passed in).
inline grape::cpu::rotate_qk_args fused_args(fused_workspace& w, int threads,
                                             grape::cpu::qk_rms_norm& norm,
                                             grape::cpu::kv_cache_write& kv) {
  const std::int64_t qr = w.q_row(), kr = w.kv_row(), n = w.tokens;
  grape::cpu::rotate_qk_args a;
  a.type = w.type;
  a.q = {w.q.get(), w.q.get(), fused_q_heads, n * qr, 0, qr, head_dim};
  a.k = {w.k.get(), nullptr, fused_kv_heads, n * kr, 0, kr, head_dim};
  a.seq_len = n;
  a.position_ids = w.positions.data();
  a.threads = threads;
  norm.q_weight = w.q_weight.data();
  norm.k_weight = w.k_weight.data();
  norm.eps = fused_eps;
  kv.slot_mapping = w.slots.data();
  kv.block_size = fused_block_size;
  kv.blocks = (n + fused_block_size - 1) / fused_block_size;
  kv.k = {w.k_cache.get(), n * kr, fused_block_size * kr, kr, head_dim};
  kv.v = {w.v_cache.get(), n * kr, fused_block_size * kr, kr, head_dim};
  kv.values = {w.v.get(), nullptr, fused_kv_heads, n * kr, 0, kr, head_dim};
  a.qk_norm = &norm;
  a.kv_cache = &kv;
  return a;
}

/// Unfused step 1: RMSNorm of every head in place (float32 arithmetic, vectorized conversions).
template <class T>
void rms_norm_heads(T* x, std::int64_t tokens, std::int64_t heads, const float* weight,
                    int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      T* p = x + (t * heads + h) * head_dim;
      alignas(64) float buf[head_dim];
      grape::cpu::detail::widen<T, head_dim>(p, buf);
      float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
      for (int c = 0; c < head_dim; ++c) squares += buf[c] * buf[c];
      const float inv = 1.0f / std::sqrt(squares / head_dim + fused_eps);
#pragma omp simd
      for (int c = 0; c < head_dim; ++c) buf[c] *= inv * weight[c];
      grape::cpu::detail::narrow<T, head_dim>(buf, p);
    }
}

/// Copies every token's K and V rows into their cache slots (the last unfused step and, with Q
/// scaled in place, the baseline).
inline void copy_to_cache(fused_workspace& w, int threads) {
  const std::size_t rb = static_cast<std::size_t>(w.kv_row()) * type_bytes(w.type);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < w.tokens; ++t) {
    const std::size_t at = static_cast<std::size_t>(w.slots[t]) * rb;
    std::memcpy(w.k_cache.get() + at, w.k.get() + t * rb, rb);
    std::memcpy(w.v_cache.get() + at, w.v.get() + t * rb, rb);
  }
}

template <class T>
void scale_q(fused_workspace& w, int threads) {
  const float s = runtime_one;
  T* q = reinterpret_cast<T*>(w.q.get());
  const std::int64_t row = w.q_row();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < w.tokens; ++t) scale_row(q + t * row, row, s);
}

template <class T>
void fused_baseline(fused_workspace& w, int threads) {
  scale_q<T>(w, threads);
  copy_to_cache(w, threads);
}

template <class T>
void unfused(fused_workspace& w, const grape::rotary_spec& spec, int threads) {
  rms_norm_heads(reinterpret_cast<T*>(w.q.get()), w.tokens, fused_q_heads, w.q_weight.data(), threads);
  rms_norm_heads(reinterpret_cast<T*>(w.k.get()), w.tokens, fused_kv_heads, w.k_weight.data(), threads);
  // The fused call's arguments without the fusions: K rotated in place.
  grape::cpu::qk_rms_norm norm;
  grape::cpu::kv_cache_write kv;
  grape::cpu::rotate_qk_args a = fused_args(w, threads, norm, kv);
  a.k.out = w.k.get();
  a.qk_norm = nullptr;
  a.kv_cache = nullptr;
  grape::cpu::rotate_qk(spec, a);
  copy_to_cache(w, threads);
}

}  // namespace grape_bench
