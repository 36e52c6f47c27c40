#pragma once
// The CUDA flash attention's thread block, as a block program (block_program.hpp) that the host
// emulation runs unchanged: block (query block x, sequence y, head z) computes
//
//   O[i] = Σ_j softmax_j(scale·q_i·k_j + bias(h, pos_i, pos_j) + mask(i, j))·v_j
//
// for `rows` queries, over key tiles of `cols` keys: online softmax in float32, scores and the
// output accumulator in shared memory, the products through tile_mma.hpp (tensor cores for
// __half/__nv_bfloat16, P rounded to the storage type as flash attention does). Q, K, V are the
// encoded operands (a rotation already applied, cuda::rotate_qk); the bias is the encoding's score
// bias (GRAPE-AP's walks each row down its keys: path_scores.hpp). The mask uses each token's
// index in its sequence, the bias its position (ids or index), as cpu::attention does.
#include <cmath>
#include <cstdint>
#include <limits>

#include "cuda/block_program.hpp"
#include "cuda/flash_scores.hpp"
#include "cuda/storage.hpp"
#include "cuda/tile_mma.hpp"
#include "grape/config.hpp"

namespace grape::cuda {

/// Byte offsets of the block's shared memory (each 32-byte aligned, as WMMA loads need).
struct flash_smem {
  std::int64_t q, k, v, p, s, o, stats, walk, bytes;
};

GRAPE_HOST_DEVICE inline std::int64_t align32(std::int64_t n) { return (n + 31) / 32 * 32; }

GRAPE_HOST_DEVICE inline flash_smem flash_smem_of(int element_bytes, int rows, int cols, int head_dim, int v_dim) {
  flash_smem m{};
  m.q = 0;
  m.k = m.q + align32(static_cast<std::int64_t>(rows) * head_dim * element_bytes);
  m.v = m.k + align32(static_cast<std::int64_t>(cols) * head_dim * element_bytes);
  m.p = m.v + align32(static_cast<std::int64_t>(cols) * v_dim * element_bytes);
  m.s = m.p + align32(static_cast<std::int64_t>(rows) * cols * element_bytes);
  m.o = m.s + align32(static_cast<std::int64_t>(rows) * cols * 4);
  m.stats = m.o + align32(static_cast<std::int64_t>(rows) * v_dim * 4);
  m.walk = m.stats + align32(static_cast<std::int64_t>(3) * rows * 4);
  m.bytes = m.walk + align32(static_cast<std::int64_t>(rows) * sizeof(row_state));  // a walking bias's rows
  return m;
}

/// Rows [0, here) of an operand (src: its first token's row for one head, rows token_stride apart,
/// channels contiguous) into a [rows, dim] shared tile, zeros past `here`.
template <class T>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void load_tile(const block_shape& b, T* tile, const T* src,
                                                    std::int64_t token_stride, int rows, int here, int dim) {
  const T zero = storage<T>::store(0.0f);
  for_threads(b, [&](int tid) {
    for (int e = tid; e < rows * dim; e += b.threads) {
      const int r = e / dim, c = e % dim;
      tile[e] = r < here ? src[r * token_stride + c] : zero;
    }
  });
}

template <class T, class Bias>
struct flash_program {
  const T* q = nullptr;  // [tokens, q_heads, head_dim] at the strides below (channels contiguous)
  const T* k = nullptr;  // [tokens, k_heads, head_dim]
  const T* v = nullptr;  // [tokens, v_heads, v_dim]
  T* out = nullptr;      // [tokens, q_heads, v_dim], contiguous
  float* lse = nullptr;  // [q_heads, tokens] or null
  std::int64_t q_token_stride = 0, q_head_stride = 0, k_token_stride = 0, k_head_stride = 0;
  std::int64_t v_token_stride = 0, v_head_stride = 0;
  int q_heads = 0, k_heads = 0, v_heads = 0, head_dim = 0, v_dim = 0;
  const std::int64_t* cu_seqlens = nullptr;  // [batch + 1], or null: sequence b is tokens [b·seq_len, (b+1)·seq_len)
  std::int64_t seq_len = 0, tokens = 0;
  const std::int64_t* positions = nullptr;  // per token, or null: its index in its sequence
  bool causal = true;
  std::int64_t window = 0;
  float scale = 1.0f;
  int rows = 64, cols = 64;  // multiples of 16; threads = 2·rows (one warp per 16 rows)
  int* error = nullptr;      // set to 1 by a bad cu_seqlens or a bias position out of range
  Bias bias;

  GRAPE_HOST_DEVICE bool sees(std::int64_t i, std::int64_t j) const {
    return (!causal || j <= i) && (window <= 0 || (i - j < window && (causal || j - i < window)));
  }

  /// Sequence `sequence`'s first token and length; false, with the error flag set, for a
  /// cu_seqlens entry outside the tokens.
  GRAPE_HOST_DEVICE bool sequence_of(std::int64_t sequence, std::int64_t& start, std::int64_t& len) const {
    start = sequence * seq_len;
    len = seq_len;
    if (cu_seqlens) {
      start = cu_seqlens[sequence];
      len = cu_seqlens[sequence + 1] - start;
      if (start < 0 || len < 0 || start + len > tokens) {
        *error = 1;  // every thread writes the same value
        return false;
      }
    }
    return true;
  }

  GRAPE_HOST_DEVICE std::int64_t position(std::int64_t start, std::int64_t i) const {
    return positions ? positions[start + i] : i;
  }

  /// Keys [begin, end) that the queries [i0, last] of a sequence of `len` tokens can see.
  GRAPE_HOST_DEVICE void key_range(std::int64_t i0, std::int64_t last, std::int64_t len, std::int64_t& begin,
                                   std::int64_t& end) const {
    begin = window > 0 && i0 - window + 1 > 0 ? i0 - window + 1 : 0;
    end = len;
    if (causal) end = last + 1;
    else if (window > 0 && last + window < len) end = last + window;
  }

  /// K rows [j0, j0 + here) of head kh and V rows of head vh into tiles of `keys` rows.
  GRAPE_HOST_DEVICE void load_keys(const block_shape& b, T* ks, T* vs, std::int64_t start, std::int64_t j0, int keys,
                                   int here, std::int64_t kh, std::int64_t vh) const {
    load_tile(b, ks, k + (start + j0) * k_token_stride + kh * k_head_stride, k_token_stride, keys, here, head_dim);
    load_tile(b, vs, v + (start + j0) * v_token_stride + vh * v_head_stride, v_token_stride, keys, here, v_dim);
  }

  GRAPE_HOST_DEVICE void run(std::int64_t query_block, std::int64_t sequence, std::int64_t h, const block_shape& b,
                             unsigned char* smem) const {
    constexpr float minus_inf = -INFINITY;
    std::int64_t start = 0, len = 0;
    if (!sequence_of(sequence, start, len)) return;
    const std::int64_t i0 = query_block * rows;
    if (i0 >= len) return;  // the whole block leaves together: no barrier is left waiting
    const int here = static_cast<int>(len - i0 < rows ? len - i0 : rows);
    const std::int64_t kh = h / (q_heads / k_heads), vh = h / (q_heads / v_heads);
    const flash_smem at = flash_smem_of(sizeof(T), rows, cols, head_dim, v_dim);
    T *qs, *ks, *vs, *ps;
    float *ss, *os, *row_max;
    row_state* walk;
    carve(smem, at.q, qs, at.k, ks, at.v, vs, at.p, ps, at.s, ss, at.o, os, at.stats, row_max, at.walk, walk);
    float* row_sum = row_max + rows;
    float* rescale = row_sum + rows;
    constexpr bool walks = walks_rows<Bias>::value;

    load_tile(b, qs, q + (start + i0) * q_token_stride + h * q_head_stride, q_token_stride, rows, here, head_dim);
    for_threads(b, [&](int tid) {
      for (int e = tid; e < rows * v_dim; e += b.threads) os[e] = 0.0f;
      if (tid < rows) {
        row_max[tid] = minus_inf;
        row_sum[tid] = 0.0f;
        if constexpr (walks) walk[tid] = Bias::row_start(tid < here ? position(start, i0 + tid) : i0 + tid);
      }
    });

    const std::int64_t last = i0 + here - 1;
    std::int64_t j_begin = 0, j_end = 0;
    key_range(i0, last, len, j_begin, j_end);
    const std::int64_t tiles = j_end > j_begin ? (j_end - j_begin + cols - 1) / cols : 0;
    for (std::int64_t tile = 0; tile < tiles; ++tile) {
      // A walking bias goes down the keys, each term once; the online softmax takes any order.
      const std::int64_t j0 = j_begin + (walks ? tiles - 1 - tile : tile) * cols;
      const int cols_here = static_cast<int>(len - j0 < cols ? len - j0 : cols);
      block_sync();  // the previous tile's products are done with K, V and P
      load_keys(b, ks, vs, start, j0, cols, cols_here, kh, vh);
      block_sync();
      for_warps(b, [&](int w) {
        const std::int64_t strip = static_cast<std::int64_t>(16) * w;  // this warp's 16 query rows
        warp_scores(ss + strip * cols, cols, qs + strip * head_dim, head_dim, ks, head_dim, cols, head_dim);
      });
      block_sync();
      for_threads(b, [&](int r) {
        if (r >= rows) return;
        float* s = ss + static_cast<std::int64_t>(r) * cols;
        T* p = ps + static_cast<std::int64_t>(r) * cols;
        const std::int64_t i = i0 + r;
        const auto bias_row = bias_row_of(bias, h, r < here ? position(start, i) : i, walk + r);
        float best = row_max[r];
        for (int e = 0; e < cols; ++e) {
          const int c = walks ? cols - 1 - e : e;
          const std::int64_t j = j0 + c;
          float x = minus_inf;
          if (r < here && c < cols_here && sees(i, j)) {
            x = s[c] * scale;
            if constexpr (!Bias::none) x += bias_row(position(start, j));
          }
          s[c] = x;
          best = x > best ? x : best;
        }
        // A row that has seen nothing yet (all −∞) shifts by 0: its exponentials are 0, not NaN.
        const float shift = best == minus_inf ? 0.0f : best;
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) {
          const T rounded = storage<T>::store(expf(s[c] - shift));
          p[c] = rounded;
          sum += storage<T>::load(rounded);  // normalise by the weights the product uses
        }
        rescale[r] = expf(row_max[r] - shift);
        row_sum[r] = row_sum[r] * rescale[r] + sum;
        row_max[r] = best;
      });
      block_sync();
      for_threads(b, [&](int tid) {
        for (int e = tid; e < rows * v_dim; e += b.threads) os[e] *= rescale[e / v_dim];
      });
      block_sync();
      for_warps(b, [&](int w) {
        const std::int64_t strip = static_cast<std::int64_t>(16) * w;
        warp_accumulate(os + strip * v_dim, v_dim, ps + strip * cols, cols, vs, v_dim, v_dim, cols);
      });
    }
    block_sync();
    for_threads(b, [&](int tid) {
      for (int e = tid; e < here * v_dim; e += b.threads) {
        const int r = e / v_dim, c = e % v_dim;
        const float inv = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f;  // a row that sees nothing outputs 0
        out[((start + i0 + r) * q_heads + h) * v_dim + c] = storage<T>::store(os[e] * inv);
      }
      if (lse && tid < here) lse[h * tokens + start + i0 + tid] = row_max[tid] + logf(row_sum[tid]);
    });
  }
};

}  // namespace grape::cuda
