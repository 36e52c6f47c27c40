#pragma once
// The two products of a decode page on Eigen's packet API: the scores of a GQA group's query rows
// against a page's key rows, and the probability-weighted sum of its value rows. A page holds a
// few rows per head (16 is usual), far too few for a packed GEMM's set-up, and Eigen's
// dynamic-size dot per (query head, key row) pays a call and a horizontal sum per 128 products,
// which kept decode at 0.4 of the copy rate (docs/performance.md). Here each key or value packet
// is loaded (and widened from 16-bit storage in registers) once and feeds the FMAs of up to four
// query heads; the value side keeps four heads' accumulators of one packet column in registers
// across the page's rows. Tails shorter than a packet go element by element.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu/storage_io.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace grape::cpu::detail {

/// A packet of float32 from storage T (widened in registers for 16-bit storage).
template <class T>
inline typename storage_packets<T>::wide load_wide(const T* x) {
  using P = storage_packets<T>;
  if constexpr (std::is_same_v<T, float>)
    return Eigen::internal::ploadu<typename P::wide>(x);
  else
    return Eigen::internal::pcast<typename P::storage, typename P::wide>(Eigen::internal::ploadu<typename P::storage>(x));
}

/// Channels handled by whole packets (the rest element by element).
template <class T>
constexpr int packet_channels(int n) {
  using P = storage_packets<T>;
  return P::vectorized ? n / P::width * P::width : 0;
}

/// S[j·ld + c] = q_j · k_c for N query rows (contiguous, d apart) and `rows` key rows: two key
/// rows at a time, so that 2N independent FMA chains hide the FMA latency and each query packet
/// serves two keys.
template <int N, class T>
void score_rows(const float* q, int d, const T* k, std::int64_t stride, std::int64_t rows, float* S, std::int64_t ld) {
  using F = typename storage_packets<T>::wide;
  constexpr int W = storage_packets<T>::width;
  const int whole = packet_channels<T>(d);
  const auto finish = [&](const F& acc, int j, const T* kr) {  // horizontal sum and the tail
    float s = whole > 0 ? Eigen::internal::predux(acc) : 0.0f;
    for (int i = whole; i < d; ++i) s += q[j * d + i] * static_cast<float>(kr[i]);
    return s;
  };
  std::int64_t c = 0;
  for (; c + 2 <= rows; c += 2) {
    const T* k0 = k + c * stride;
    const T* k1 = k0 + stride;
    F a0[N], a1[N];
    for (int j = 0; j < N; ++j) a0[j] = a1[j] = Eigen::internal::pset1<F>(0.0f);
    for (int i = 0; i < whole; i += W) {
      const F x0 = load_wide(k0 + i), x1 = load_wide(k1 + i);
      for (int j = 0; j < N; ++j) {
        const F qj = Eigen::internal::ploadu<F>(q + j * d + i);
        a0[j] = Eigen::internal::pmadd(qj, x0, a0[j]);
        a1[j] = Eigen::internal::pmadd(qj, x1, a1[j]);
      }
    }
    for (int j = 0; j < N; ++j) {
      S[j * ld + c] = finish(a0[j], j, k0);
      S[j * ld + c + 1] = finish(a1[j], j, k1);
    }
  }
  for (; c < rows; ++c) {
    const T* kr = k + c * stride;
    F acc[N];
    for (int j = 0; j < N; ++j) acc[j] = Eigen::internal::pset1<F>(0.0f);
    for (int i = 0; i < whole; i += W) {
      const F x = load_wide(kr + i);
      for (int j = 0; j < N; ++j) acc[j] = Eigen::internal::pmadd(Eigen::internal::ploadu<F>(q + j * d + i), x, acc[j]);
    }
    for (int j = 0; j < N; ++j) S[j * ld + c] = finish(acc[j], j, kr);
  }
}

/// acc_j += Σ_c p[j·ld + c] · v_c for N accumulator rows (acc_stride apart) and `rows` value rows:
/// two packet columns at a time (2N accumulators in registers across the rows; each broadcast
/// probability serves both).
template <int N, class T>
void accumulate_rows(const float* p, std::int64_t ld, const T* v, std::int64_t stride, std::int64_t rows, int v_dim,
                     float* acc, std::int64_t acc_stride) {
  using F = typename storage_packets<T>::wide;
  constexpr int W = storage_packets<T>::width;
  const int whole = packet_channels<T>(v_dim);
  int i = 0;
  for (; i + 2 * W <= whole; i += 2 * W) {
    F a0[N], a1[N];
    for (int j = 0; j < N; ++j) {
      a0[j] = Eigen::internal::ploadu<F>(acc + j * acc_stride + i);
      a1[j] = Eigen::internal::ploadu<F>(acc + j * acc_stride + i + W);
    }
    for (std::int64_t c = 0; c < rows; ++c) {
      const F x0 = load_wide(v + c * stride + i), x1 = load_wide(v + c * stride + i + W);
      for (int j = 0; j < N; ++j) {
        const F pj = Eigen::internal::pset1<F>(p[j * ld + c]);
        a0[j] = Eigen::internal::pmadd(pj, x0, a0[j]);
        a1[j] = Eigen::internal::pmadd(pj, x1, a1[j]);
      }
    }
    for (int j = 0; j < N; ++j) {
      Eigen::internal::pstoreu(acc + j * acc_stride + i, a0[j]);
      Eigen::internal::pstoreu(acc + j * acc_stride + i + W, a1[j]);
    }
  }
  for (; i < whole; i += W) {
    F a[N];
    for (int j = 0; j < N; ++j) a[j] = Eigen::internal::ploadu<F>(acc + j * acc_stride + i);
    for (std::int64_t c = 0; c < rows; ++c) {
      const F x = load_wide(v + c * stride + i);
      for (int j = 0; j < N; ++j) a[j] = Eigen::internal::pmadd(Eigen::internal::pset1<F>(p[j * ld + c]), x, a[j]);
    }
    for (int j = 0; j < N; ++j) Eigen::internal::pstoreu(acc + j * acc_stride + i, a[j]);
  }
  for (i = whole; i < v_dim; ++i)
    for (std::int64_t c = 0; c < rows; ++c) {
      const float x = static_cast<float>(v[c * stride + i]);
      for (int j = 0; j < N; ++j) acc[j * acc_stride + i] += p[j * ld + c] * x;
    }
}

/// Asks for the cache lines of count elements from p into L2 (a hint: no fault, no wait). L2, not
/// L1: decode prefetches a whole page ahead of its use, more than L1 holds at float32: into L1,
/// float32 decode slows; into L2, neither storage does (docs/performance.md, appendix "Fused
/// attention").
template <class T>
inline void prefetch_elements(const T* p, std::int64_t count) {
  const char* bytes = reinterpret_cast<const char*>(p);
  for (std::int64_t at = 0; at < count * static_cast<std::int64_t>(sizeof(T)); at += 64)
    __builtin_prefetch(bytes + at, 0, 2);
}

/// Runs body<N>(first row) over `count` rows in blocks of four, then the remainder.
template <class Body>
void in_blocks_of_four(std::int64_t count, Body&& body) {
  std::int64_t g = 0;
  for (; g + 4 <= count; g += 4) body.template operator()<4>(g);
  switch (count - g) {
    case 3: body.template operator()<3>(g); break;
    case 2: body.template operator()<2>(g); break;
    case 1: body.template operator()<1>(g); break;
    default: break;
  }
}

}  // namespace grape::cpu::detail

#pragma GCC diagnostic pop
