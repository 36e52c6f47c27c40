#pragma once
// The flash loop's two matrix products, one warp over a strip of 16 rows in shared memory:
//   warp_scores:     S[16 × n] = A[16 × depth] · B[n × depth]ᵀ     (rows of Q against rows of K)
//   warp_accumulate: C[16 × n] += P[16 × depth] · V[depth × n]    (or Pᵀ given: the backward's)
// n and depth are multiples of 16. On the device, __half and __nv_bfloat16 go through the tensor
// cores (WMMA 16×16×16, float accumulation; sm_80 and later); float storage, and every type in the
// host emulation, through the lanes: each of the 32 lanes owns every 32nd output and accumulates
// it in float over depth in order. WMMA over mma.sync: its fragments are opaque, so the flash loop
// keeps scores and the output accumulator in shared memory (docs/cuda.md says why that is the
// first step and what it costs).
#include <cstdint>
#include <type_traits>

#include "cuda/block_program.hpp"
#include "cuda/storage.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#include <mma.h>
#define GRAPE_TENSOR_CORES 1
#endif

namespace grape::cuda {

#if defined(GRAPE_TENSOR_CORES)
template <class T>
inline constexpr bool tensor_core_type = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
#endif

template <class T>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void warp_scores(float* s, int lds, const T* a, int lda, const T* b, int ldb,
                                                      int n, int depth) {
#if defined(GRAPE_TENSOR_CORES)
  if constexpr (tensor_core_type<T>) {
    namespace wmma = nvcuda::wmma;
    for (int t = 0; t < n; t += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::fill_fragment(c, 0.0f);
      for (int k = 0; k < depth; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;  // Bᵀ: B's rows are its columns
        wmma::load_matrix_sync(fa, a + k, lda);
        wmma::load_matrix_sync(fb, b + static_cast<std::int64_t>(t) * ldb + k, ldb);
        wmma::mma_sync(c, fa, fb, c);
      }
      wmma::store_matrix_sync(s + t, c, lds, wmma::mem_row_major);
    }
    return;
  }
#endif
  for_lanes([&](int lane) {
    for (int e = lane; e < 16 * n; e += warp_size) {
      const int r = e / n, c = e % n;
      const T* x = a + static_cast<std::int64_t>(r) * lda;
      const T* y = b + static_cast<std::int64_t>(c) * ldb;
      float sum = 0.0f;
      for (int k = 0; k < depth; ++k) sum += storage<T>::load(x[k]) * storage<T>::load(y[k]);
      s[static_cast<std::int64_t>(r) * lds + c] = sum;
    }
  });
}

/// C += A·B with A row-major [16 × depth] (a_transposed: A given as Aᵀ, [depth × 16] rows lda
/// apart, as the backward's Pᵀ·dO and dSᵀ·Q read P and dS).
template <bool a_transposed = false, class T>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void warp_accumulate(float* c, int ldc, const T* a, int lda, const T* v, int ldv,
                                                          int n, int depth) {
#if defined(GRAPE_TENSOR_CORES)
  if constexpr (tensor_core_type<T>) {
    namespace wmma = nvcuda::wmma;
    using a_layout = std::conditional_t<a_transposed, wmma::col_major, wmma::row_major>;
    for (int t = 0; t < n; t += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, c + t, ldc, wmma::mem_row_major);
      for (int k = 0; k < depth; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, a_layout> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fv;
        wmma::load_matrix_sync(fa, a_transposed ? a + static_cast<std::int64_t>(k) * lda : a + k, lda);
        wmma::load_matrix_sync(fv, v + static_cast<std::int64_t>(k) * ldv + t, ldv);
        wmma::mma_sync(acc, fa, fv, acc);
      }
      wmma::store_matrix_sync(c + t, acc, ldc, wmma::mem_row_major);
    }
    return;
  }
#endif
  for_lanes([&](int lane) {
    for (int e = lane; e < 16 * n; e += warp_size) {
      const int r = e / n, col = e % n;
      float sum = c[static_cast<std::int64_t>(r) * ldc + col];
      for (int k = 0; k < depth; ++k) {
        const std::int64_t row = a_transposed ? k : r, column = a_transposed ? r : k;
        const T x = a[row * lda + column];
        sum += storage<T>::load(x) * storage<T>::load(v[static_cast<std::int64_t>(k) * ldv + col]);
      }
      c[static_cast<std::int64_t>(r) * ldc + col] = sum;
    }
  });
}

}  // namespace grape::cuda
