#pragma once
// The flash loop's two matrix products, one warp over a strip of 16 rows in shared memory, both
// warp_product:
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

/// C[16 × n] = A·B, or C += A·B with accumulate. A [16 × depth] is given row-major (lda), or as Aᵀ
/// ([depth × 16], rows lda apart) with a_transposed; B [depth × n] row-major (ldb), or as Bᵀ
/// ([n × depth], rows ldb apart) with b_transposed.
template <bool a_transposed, bool b_transposed, bool accumulate, class T>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void warp_product(float* c, int ldc, const T* a, int lda, const T* b, int ldb,
                                                       int n, int depth) {
#if defined(GRAPE_TENSOR_CORES)
  if constexpr (tensor_core_type<T>) {
    namespace wmma = nvcuda::wmma;
    using a_layout = std::conditional_t<a_transposed, wmma::col_major, wmma::row_major>;
    using b_layout = std::conditional_t<b_transposed, wmma::col_major, wmma::row_major>;
    for (int t = 0; t < n; t += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      if constexpr (accumulate)
        wmma::load_matrix_sync(acc, c + t, ldc, wmma::mem_row_major);
      else
        wmma::fill_fragment(acc, 0.0f);
      for (int k = 0; k < depth; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, a_layout> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, b_layout> fb;
        wmma::load_matrix_sync(fa, a_transposed ? a + static_cast<std::int64_t>(k) * lda : a + k, lda);
        wmma::load_matrix_sync(
            fb, b_transposed ? b + static_cast<std::int64_t>(t) * ldb + k : b + static_cast<std::int64_t>(k) * ldb + t,
            ldb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(c + t, acc, ldc, wmma::mem_row_major);
    }
    return;
  }
#endif
  for_lanes([&](int lane) {
    for (int e = lane; e < 16 * n; e += warp_size) {
      const int r = e / n, col = e % n;
      float sum = accumulate ? c[static_cast<std::int64_t>(r) * ldc + col] : 0.0f;
      for (int k = 0; k < depth; ++k) {
        const std::int64_t a_at = a_transposed ? std::int64_t{k} * lda + r : std::int64_t{r} * lda + k;
        const std::int64_t b_at = b_transposed ? std::int64_t{col} * ldb + k : std::int64_t{k} * ldb + col;
        sum += storage<T>::load(a[a_at]) * storage<T>::load(b[b_at]);
      }
      c[static_cast<std::int64_t>(r) * ldc + col] = sum;
    }
  });
}

/// S = A·Bᵀ: the scores of 16 query rows against n key rows.
template <class T>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void warp_scores(float* s, int lds, const T* a, int lda, const T* b, int ldb,
                                                      int n, int depth) {
  warp_product<false, true, false>(s, lds, a, lda, b, ldb, n, depth);
}

/// C += A·V (a_transposed: A given as Aᵀ, as the backward's Pᵀ·dO and dSᵀ·Q read P and dS).
template <bool a_transposed = false, class T>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void warp_accumulate(float* c, int ldc, const T* a, int lda, const T* v, int ldv,
                                                          int n, int depth) {
  warp_product<a_transposed, false, true>(c, ldc, a, lda, v, ldv, n, depth);
}

}  // namespace grape::cuda
