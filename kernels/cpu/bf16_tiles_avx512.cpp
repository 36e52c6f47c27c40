// The AVX512-BF16 bodies of cpu/bf16_tiles.hpp: the only unit compiled with -mavx512bf16
// (kernels/CMakeLists.txt), run only on CPUs that have it (cpu/matmul_path.hpp). It defines no
// inline function or template shared with other units, so no AVX-512 code can stand in for one
// of theirs at link time.
#include "cpu/bf16_tiles.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

namespace grape::cpu::detail::bf16 {

namespace {

__mmask16 first_lanes(std::int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }

/// Rows [0, Mr) × column blocks [0, Nv) of C from A rows (lda apart) and B's blocks (`blocks`
/// per pair): Mr·Nv accumulators in registers, one B load per block and one A broadcast per row
/// for each pair. `last` masks the columns of the last block. With `toeplitz`, row r's sums get
/// toeplitz[c − r] added as they are stored (after the sums, as a separate pass would add them).
template <int Mr, int Nv>
void micro_tile(float* c, std::int64_t ldc, const element* a, std::int64_t lda, const element* b, std::int64_t blocks,
                std::int64_t pairs_, __mmask16 last, bool accumulate, const float* toeplitz) {
  __m512 acc[Mr][Nv];
  for (int r = 0; r < Mr; ++r)
    for (int v = 0; v < Nv; ++v)
      acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(v == Nv - 1 ? last : __mmask16(0xffff), c + r * ldc + 16 * v)
                             : _mm512_setzero_ps();
  for (std::int64_t p = 0; p < pairs_; ++p) {
    __m512bh bv[Nv];
    for (int v = 0; v < Nv; ++v) bv[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + (p * blocks + v) * 32));
    for (int r = 0; r < Mr; ++r) {
      std::int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * p, 4);
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
      for (int v = 0; v < Nv; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  for (int r = 0; r < Mr; ++r)
    for (int v = 0; v < Nv; ++v) {
      const __mmask16 m = v == Nv - 1 ? last : __mmask16(0xffff);
      if (toeplitz) acc[r][v] = _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(m, toeplitz - r + 16 * v));
      _mm512_mask_storeu_ps(c + r * ldc + 16 * v, m, acc[r][v]);
    }
}

/// Every row of one pass of Nv column blocks: 8 rows at a time (16 accumulators, as fast as 6 × 4
/// blocks: docs/performance.md, "bf16 tiles on AVX512-BF16"), then the remaining rows.
template <int Nv>
void column_pass(float* c, std::int64_t ldc, const element* a, std::int64_t lda, const element* b,
                 std::int64_t blocks, std::int64_t pairs_, std::int64_t rows, __mmask16 last, bool accumulate,
                 const float* toeplitz) {
  constexpr int Mr = 8;
  std::int64_t m = 0;
  // Row m's offsets start m before row 0's.
  const auto shifted = [&] { return toeplitz ? toeplitz - m : nullptr; };
  for (; m + Mr <= rows; m += Mr)
    micro_tile<Mr, Nv>(c + m * ldc, ldc, a + m * lda, lda, b, blocks, pairs_, last, accumulate, shifted());
  float* cm = c + m * ldc;
  const element* am = a + m * lda;
  const float* tm = shifted();
  switch (rows - m) {
    case 7: return micro_tile<7, Nv>(cm, ldc, am, lda, b, blocks, pairs_, last, accumulate, tm);
    case 6: return micro_tile<6, Nv>(cm, ldc, am, lda, b, blocks, pairs_, last, accumulate, tm);
    case 5: return micro_tile<5, Nv>(cm, ldc, am, lda, b, blocks, pairs_, last, accumulate, tm);
    case 4: return micro_tile<4, Nv>(cm, ldc, am, lda, b, blocks, pairs_, last, accumulate, tm);
    case 3: return micro_tile<3, Nv>(cm, ldc, am, lda, b, blocks, pairs_, last, accumulate, tm);
    case 2: return micro_tile<2, Nv>(cm, ldc, am, lda, b, blocks, pairs_, last, accumulate, tm);
    case 1: return micro_tile<1, Nv>(cm, ldc, am, lda, b, blocks, pairs_, last, accumulate, tm);
    default: return;
  }
}

}  // namespace

void pack_b(element* out, const float* b, std::int64_t k_stride, std::int64_t n_stride, std::int64_t depth,
            std::int64_t cols) {
  const std::int64_t np = pairs(depth), blocks = column_blocks(cols);
  // cvtne2ps gives row 2p's 16 values then row 2p + 1's; this permutation interleaves them.
  alignas(64) static constexpr std::int16_t interleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                              21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                              11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(interleave);
  if (n_stride == 1) {  // rows of B contiguous (V, Q, K, P, dS): two rows at a time, 16 columns per step
    for (std::int64_t p = 0; p < np; ++p) {
      const float* row0 = b + 2 * p * k_stride;
      const bool odd_end = 2 * p + 1 == depth;
      for (std::int64_t j = 0; j < blocks; ++j) {
        const __mmask16 m = first_lanes(cols - 16 * j);
        const __m512 x0 = _mm512_maskz_loadu_ps(m, row0 + 16 * j);
        const __m512 x1 = odd_end ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, row0 + k_stride + 16 * j);
        const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));
        _mm512_storeu_si512(out + (p * blocks + j) * 32, _mm512_permutexvar_epi16(order, both));
      }
    }
    return;
  }
  // Strided rows (Kᵀ, Vᵀ): each lane gathers its column's two values of the pair.
  const __m512i lanes = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(static_cast<int>(n_stride)));
  for (std::int64_t p = 0; p < np; ++p) {
    const bool odd_end = 2 * p + 1 == depth;
    for (std::int64_t j = 0; j < blocks; ++j) {
      const __mmask16 m = first_lanes(cols - 16 * j);
      const float* base = b + 2 * p * k_stride + 16 * j * n_stride;
      const __m512 x0 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, lanes, base, 4);
      const __m512 x1 =
          odd_end ? _mm512_setzero_ps() : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, lanes, base + k_stride, 4);
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));
      _mm512_storeu_si512(out + (p * blocks + j) * 32, _mm512_permutexvar_epi16(order, both));
    }
  }
}

void round_rows(element* out, std::int64_t ld_out, const float* a, std::int64_t lda, std::int64_t rows,
                std::int64_t depth) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = a + r * lda;
    element* o = out + r * ld_out;
    for (std::int64_t k = 0; k < depth; k += 16) {
      const __mmask16 m = first_lanes(depth - k);
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, in + k));
      _mm256_mask_storeu_epi16(o + k, m, reinterpret_cast<__m256i>(h));
    }
    if (depth % 2) o[depth] = 0;
  }
}

void round_columns(element* out, std::int64_t ld_out, const float* a, std::int64_t lda, std::int64_t rows,
                   std::int64_t depth) {
  const __m512i lanes = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(static_cast<int>(lda)));
  for (std::int64_t r = 0; r < rows; ++r) {
    element* o = out + r * ld_out;
    for (std::int64_t k = 0; k < depth; k += 16) {
      const __mmask16 m = first_lanes(depth - k);
      const __m512 x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, lanes, a + k * lda + r, 4);
      _mm256_mask_storeu_epi16(o + k, m, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x)));
    }
    if (depth % 2) o[depth] = 0;
  }
}

void multiply(float* c, std::int64_t ldc, const element* a, std::int64_t lda, const element* b, std::int64_t rows,
              std::int64_t cols, std::int64_t depth, bool accumulate, const float* toeplitz) {
  const std::int64_t blocks = column_blocks(cols), np = pairs(depth);
  const auto at = [&](std::int64_t column) { return toeplitz ? toeplitz + column : nullptr; };
  for (std::int64_t j = 0; j < blocks; j += 2) {
    const bool two = j + 1 < blocks;
    const __mmask16 last = first_lanes(cols - 16 * (two ? j + 1 : j));
    if (two)
      column_pass<2>(c + 16 * j, ldc, a, lda, b + 32 * j, blocks, np, rows, last, accumulate, at(16 * j));
    else
      column_pass<1>(c + 16 * j, ldc, a, lda, b + 32 * j, blocks, np, rows, last, accumulate, at(16 * j));
  }
}

}  // namespace grape::cpu::detail::bf16

#else  // not x86-64: matmul_path_for never chooses avx512_bf16, so these are never called

#include <cstdlib>

namespace grape::cpu::detail::bf16 {
void pack_b(element*, const float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t) { std::abort(); }
void round_rows(element*, std::int64_t, const float*, std::int64_t, std::int64_t, std::int64_t) { std::abort(); }
void round_columns(element*, std::int64_t, const float*, std::int64_t, std::int64_t, std::int64_t) { std::abort(); }
void multiply(float*, std::int64_t, const element*, std::int64_t, const element*, std::int64_t, std::int64_t,
              std::int64_t, bool, const float*) {
  std::abort();
}
}  // namespace grape::cpu::detail::bf16

#endif  // __x86_64__
