#pragma once
// The CUDA decode attention over a paged KV cache (cpu::attention_decode's, on the device), as
// block programs (block_program.hpp) that the host emulation runs unchanged:
//
//   decode_positions: one thread per sequence checks its length, its block-table row and its
//                     query position (q_positions[b], or seq_lens[b] − 1), and writes the position;
//   decode_program:   a block per (chunk of ~1024 cached tokens, sequence, query heads of one KV
//                     head): K and V rows of the chunk loaded page by page into shared memory, 32
//                     at a time, every query head's scores, an online softmax per head (the bias
//                     added as cpu::attention_decode adds it: key j at position j, the query at
//                     its position; keys after the query or outside the window never enter), and
//                     the weighted V; the chunk's maximum, sum and weighted values written out;
//   decode_merge:     one thread per (sequence, query head) merges the chunks by their
//                     log-sum-exps (split-K) into the output and the log-sum-exp.
// Float32 arithmetic whatever the storage; the queries arrive encoded (rotated at their positions,
// in the storage type) and are scaled here. A bad length, block id or position sets the error
// flag and the sequence's output is not defined (0 where nothing was seen).
#include <cmath>
#include <cstdint>

#include "common/decode_args.hpp"
#include "cuda/block_program.hpp"
#include "cuda/flash_scores.hpp"
#include "cuda/storage.hpp"
#include "grape/config.hpp"

namespace grape::cuda {

/// One paged cache: element (slot s of block B, head h, channel c) at
/// B·block_stride + s·slot_stride + h·head_stride + c.
template <class T>
struct device_pages {
  const T* data = nullptr;
  std::int64_t block_stride = 0, slot_stride = 0, head_stride = 0;
};

/// The shape of a decode call, shared by the three bodies.
struct decode_shape : kernel::page_table {
  std::int64_t batch = 0, q_heads = 0, kv_heads = 0;
  int head_dim = 0, v_dim = 0;
  std::int64_t max_seq_len = 0;               // the host's bound: chunks cover it
  std::int64_t chunk = 0, chunks = 0;         // tokens per chunk (whole pages), chunks per sequence
  int heads_per_block = 0;                    // query heads of one KV head per block
  int* error = nullptr;
};

/// Positions of the queries: q_positions[b] or seq_lens[b] − 1, checked with the sequence.
struct decode_positions {
  decode_shape s;
  const std::int64_t* q_positions = nullptr;  // or null
  std::int64_t max_position = 0;
  std::int64_t* out = nullptr;  // [batch]
  GRAPE_HOST_DEVICE void operator()(std::int64_t b) const {
    const std::int64_t len = s.seq_lens[b];
    bool ok = len >= 1 && len <= s.max_blocks * s.block_size && len <= s.max_seq_len;
    for (std::int64_t i = 0; ok && i < (len + s.block_size - 1) / s.block_size; ++i) {
      const std::int64_t block = s.block_table[b * s.max_blocks + i];
      ok = block >= 0 && block < s.blocks;
    }
    const std::int64_t m = q_positions ? q_positions[b] : len - 1;
    if (!ok || m < 0 || m >= max_position) *s.error = 1;  // every thread writes the same value
    out[b] = m;
  }
};

/// Byte offsets of the decode block's shared memory.
struct decode_smem {
  std::int64_t q, k, v, s, acc, stats, walk, bytes;
};

inline constexpr int decode_keys = 32;  // K and V rows per tile

GRAPE_HOST_DEVICE inline decode_smem decode_smem_of(int element_bytes, int heads, int head_dim, int v_dim) {
  const auto align = [](std::int64_t n) { return (n + 31) / 32 * 32; };
  decode_smem m{};
  m.q = 0;
  m.k = m.q + align(static_cast<std::int64_t>(heads) * head_dim * 4);
  m.v = m.k + align(static_cast<std::int64_t>(decode_keys) * head_dim * element_bytes);
  m.s = m.v + align(static_cast<std::int64_t>(decode_keys) * v_dim * element_bytes);
  m.acc = m.s + align(static_cast<std::int64_t>(heads) * decode_keys * 4);
  m.stats = m.acc + align(static_cast<std::int64_t>(heads) * v_dim * 4);
  m.walk = m.stats + align(static_cast<std::int64_t>(3) * heads * 4);
  m.bytes = m.walk + align(static_cast<std::int64_t>(heads) * sizeof(row_state));
  return m;
}

template <class T, class Bias>
struct decode_program {
  decode_shape s;
  const T* q = nullptr;  // [batch, q_heads, head_dim]: encoded (rotated at their positions), unscaled
  device_pages<T> k, v;
  const std::int64_t* q_pos = nullptr;  // [batch] (decode_positions)
  float scale = 1.0f;
  std::int64_t window = 0;
  float* part_max = nullptr;  // [batch, chunks, q_heads]
  float* part_sum = nullptr;  // [batch, chunks, q_heads]
  float* part_acc = nullptr;  // [batch, chunks, q_heads, v_dim]
  Bias bias;

  /// Block (chunk c, sequence b, z = KV head · sub-blocks + sub-block).
  GRAPE_HOST_DEVICE void run(std::int64_t c, std::int64_t b, std::int64_t z, const block_shape& blk,
                             unsigned char* smem) const {
    constexpr float minus_inf = -INFINITY;
    const std::int64_t group = s.q_heads / s.kv_heads, subs = (group + s.heads_per_block - 1) / s.heads_per_block;
    const std::int64_t kh = z / subs, h0 = kh * group + (z % subs) * s.heads_per_block;
    const int heads = static_cast<int>(kh * group + group - h0 < s.heads_per_block ? kh * group + group - h0
                                                                                    : s.heads_per_block);
    const int d = s.head_dim, vd = s.v_dim;
    const decode_smem at = decode_smem_of(sizeof(T), s.heads_per_block, d, vd);
    float *qs, *ss, *acc, *row_max;
    T *ks, *vs;
    row_state* walk;
    carve(smem, at.q, qs, at.k, ks, at.v, vs, at.s, ss, at.acc, acc, at.stats, row_max, at.walk, walk);
    float* row_sum = row_max + s.heads_per_block;
    float* rescale = row_sum + s.heads_per_block;

    // This chunk's keys: [lo, hi], inside the sequence, at or before the query, inside the window.
    const std::int64_t len = s.seq_lens[b], m = q_pos[b];
    const bool sane = len >= 1 && len <= s.max_blocks * s.block_size && len <= s.max_seq_len && m >= 0;
    const std::int64_t first = window > 0 && m - window + 1 > 0 ? m - window + 1 : 0;
    std::int64_t lo = c * s.chunk > first ? c * s.chunk : first, hi = (c + 1) * s.chunk;
    if (hi > len) hi = len;
    if (hi > m + 1) hi = m + 1;
    hi -= 1;
    if (!sane) hi = lo - 1;  // flagged by decode_positions: nothing is read

    for_threads(blk, [&](int tid) {
      for (int e = tid; e < heads * d; e += blk.threads)
        qs[e] = scale * storage<T>::load(q[(b * s.q_heads + h0 + e / d) * d + e % d]);
      for (int e = tid; e < heads * vd; e += blk.threads) acc[e] = 0.0f;
      if (tid < heads) {
        row_max[tid] = minus_inf;
        row_sum[tid] = 0.0f;
        if constexpr (walks_rows<Bias>::value) walk[tid] = Bias::row_start(m);
      }
    });
    for (std::int64_t j0 = lo; j0 <= hi; j0 += decode_keys) {
      const int n = static_cast<int>(hi - j0 + 1 < decode_keys ? hi - j0 + 1 : decode_keys);
      block_sync();  // the previous tile's products are done with K, V and the weights
      for_threads(blk, [&](int tid) {  // rows j0 .. j0 + n − 1 of head kh from their pages
        for (int e = tid; e < n * (d > vd ? d : vd); e += blk.threads) {
          const int width = d > vd ? d : vd, r = e / width, ch = e % width;
          const std::int64_t j = j0 + r;
          const std::int64_t block = s.block_table[b * s.max_blocks + j / s.block_size];
          const bool inside = block >= 0 && block < s.blocks;  // else flagged; read nothing
          const std::int64_t slot = j % s.block_size;
          if (ch < d)
            ks[r * d + ch] = inside ? k.data[block * k.block_stride + slot * k.slot_stride + kh * k.head_stride + ch]
                                    : storage<T>::store(0.0f);
          if (ch < vd)
            vs[r * vd + ch] = inside ? v.data[block * v.block_stride + slot * v.slot_stride + kh * v.head_stride + ch]
                                     : storage<T>::store(0.0f);
        }
      });
      block_sync();
      for_threads(blk, [&](int tid) {  // a score per (query head, key)
        for (int e = tid; e < heads * decode_keys; e += blk.threads) {
          const int g = e / decode_keys, r = e % decode_keys;
          float dot = 0.0f;
          if (r < n)
            for (int ch = 0; ch < d; ++ch) dot += qs[g * d + ch] * storage<T>::load(ks[r * d + ch]);
          ss[e] = r < n ? dot : minus_inf;
        }
      });
      block_sync();
      for_threads(blk, [&](int g) {  // the online softmax of each query head over the tile
        if (g >= heads) return;
        float* row = ss + static_cast<std::int64_t>(g) * decode_keys;
        const auto bias_row = bias_row_of(bias, h0 + g, m, walk + g);
        float best = row_max[g];
        for (int r = 0; r < n; ++r) {
          if constexpr (!Bias::none) row[r] += bias_row(j0 + r);
          best = row[r] > best ? row[r] : best;
        }
        // A head whose keys all have a bias of −∞ so far shifts by 0: its exponentials are 0, not NaN.
        const float shift = best == minus_inf ? 0.0f : best;
        float sum = 0.0f;
        for (int r = 0; r < decode_keys; ++r) {
          row[r] = r < n ? expf(row[r] - shift) : 0.0f;
          sum += row[r];
        }
        rescale[g] = expf(row_max[g] - shift);
        row_sum[g] = row_sum[g] * rescale[g] + sum;
        row_max[g] = best;
      });
      block_sync();
      for_threads(blk, [&](int tid) {  // the weighted values
        for (int e = tid; e < heads * vd; e += blk.threads) {
          const int g = e / vd, ch = e % vd;
          float x = acc[e] * rescale[g];
          for (int r = 0; r < n; ++r) x += ss[g * decode_keys + r] * storage<T>::load(vs[r * vd + ch]);
          acc[e] = x;
        }
      });
    }
    block_sync();
    for_threads(blk, [&](int tid) {  // this chunk's part for the merge
      const std::int64_t part = (b * s.chunks + c) * s.q_heads + h0;
      for (int e = tid; e < heads * vd; e += blk.threads) part_acc[part * vd + e] = acc[e];
      if (tid < heads) {
        part_max[part + tid] = row_max[tid];
        part_sum[part + tid] = row_sum[tid];
      }
    });
  }
};

/// One (sequence b, query head h) per item: the chunks merged by their maxima into the output
/// [batch, q_heads, v_dim] (storage type) and the log-sum-exp [q_heads, batch] (or null).
template <class T>
struct decode_merge {
  decode_shape s;
  const float* part_max = nullptr;
  const float* part_sum = nullptr;
  const float* part_acc = nullptr;
  T* out = nullptr;
  float* lse = nullptr;
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    const std::int64_t b = item / s.q_heads, h = item % s.q_heads;
    const int vd = s.v_dim;
    float top = -INFINITY;
    for (std::int64_t c = 0; c < s.chunks; ++c) {
      const float x = part_max[(b * s.chunks + c) * s.q_heads + h];
      top = x > top ? x : top;
    }
    float sum = 0.0f;
    for (std::int64_t c = 0; top > -INFINITY && c < s.chunks; ++c)
      sum += expf(part_max[(b * s.chunks + c) * s.q_heads + h] - top) * part_sum[(b * s.chunks + c) * s.q_heads + h];
    const float inv = sum > 0 ? 1.0f / sum : 0.0f;  // no key seen: the output is 0
    for (int ch = 0; ch < vd; ++ch) {
      float x = 0.0f;
      for (std::int64_t c = 0; top > -INFINITY && c < s.chunks; ++c) {
        const std::int64_t at = (b * s.chunks + c) * s.q_heads + h;
        x += expf(part_max[at] - top) * part_acc[at * vd + ch];
      }
      out[item * vd + ch] = storage<T>::store(x * inv);
    }
    if (lse) lse[h * s.batch + b] = top + logf(sum);
  }
};

}  // namespace grape::cuda
