#pragma once
// Decode attention with the encoding inside, over a paged KV cache:
//
//   cpu::attention_decode(E::make(params), args)
//
// One new query token per sequence against the sequence's keys and values in the cache that
// rotate_qk's fused KV write fills (kv_cache_write: K already rotated at its position, V as
// given; NHD or HND pages, or any strides). Sequence b holds seq_lens[b] tokens in the blocks
// block_table[b][0..]: token j sits in slot j % block_size of block block_table[b][j / block_size]
// and has position j; the query has position q_positions[b] (default seq_lens[b] − 1, the token
// just written) and sees every cached token (and, with a window w, those less than w before it).
// The encoding: a rotation turns the query at its position (K is already turned in the cache;
// contextual GRAPE-M turns it by the phase its position reads, a row per head refusing GQA),
// a score bias adds bias(h, query position, j), a composition both; a lift (GRAPE-A) would need
// lifted keys in the cache and is refused at compile time. Float32 arithmetic whatever the
// storage. Work items are (sequence, ~1024 cached tokens): each reads its pages in one sweep, all
// KV heads of a page in turn (the query heads of a GQA group share each row), with an online
// softmax (packet products, decode_rows.hpp); the items of a sequence then merge by their
// log-sum-exps (split-K), so a single long sequence uses every thread. Bad arguments throw
// grape::input_error before any write.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "common/decode_args.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/attention.hpp"
#include "cpu/decode_rows.hpp"
#include "cpu/launch.hpp"
#include "cpu/online_softmax.hpp"
#include "grape/inject/offset_tile.hpp"

namespace grape::cpu {

namespace detail {

/// Every check of attention_decode that does not depend on the encoding; the query positions.
std::vector<std::int64_t> check_decode(const decode_args& a, int head_dim, int v_dim);

/// The online softmax of every query head of one sequence over part of its keys: per head the
/// running maximum, the sum of exponentials and the weighted sum of values.
struct decode_state {
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> acc;  // [q_heads, v_dim]
  Eigen::ArrayXf row_max, row_sum;                                             // [q_heads]
  decode_state(std::int64_t heads, int v_dim)
      : acc(decltype(acc)::Zero(heads, v_dim)),
        row_max(Eigen::ArrayXf::Constant(heads, -std::numeric_limits<float>::infinity())),
        row_sum(Eigen::ArrayXf::Zero(heads)) {}
};

/// Keys [lo, hi] of sequence b, all in one page, for every KV head: the scores of every query
/// head, a softmax step per head, then the values, a KV head at a time (its four query heads'
/// accumulators stay in registers across the page's rows). A page is a few rows, so packet dot
/// products and row updates (decode_rows.hpp), not a packed GEMM (whose set-up would cost more
/// than the page).
template <class T, class Bias>
void decode_page(const decode_args& a, std::int64_t b, std::int64_t lo, std::int64_t hi, const float* q, int d,
                 int v_dim, std::int64_t q_position, const Bias& bias, decode_state& st,
                 Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>& S) {
  const std::int64_t group = a.q_heads / a.kv_heads, rows = hi - lo + 1, ld = S.cols();
  const std::int64_t block = a.block_table[b * a.max_blocks + lo / a.block_size], slot = lo % a.block_size;
  const auto rows_of = [&](const paged_cache& c, std::int64_t kh) {
    return static_cast<const T*>(c.data) + block * c.block_stride + slot * c.slot_stride + kh * c.head_stride;
  };
  // The scores in the order of K's addresses: slot by slot, every KV head of a slot in turn, where
  // a slot's heads are adjacent (NHD); head by head, every slot of a head in turn, where a head's
  // slots are (HND). A head at a time, an NHD page's rows lie a slot apart, a stride the hardware
  // prefetchers do not follow; the sweep in address order reads K in sequence
  // (docs/performance.md, appendix "Fused attention").
  const auto scores = [&](std::int64_t c, std::int64_t count, std::int64_t kh) {
    in_blocks_of_four(group, [&]<int N>(std::int64_t g) {
      const std::int64_t h = kh * group + g;
      score_rows<N>(q + h * d, d, rows_of(a.k, kh) + c * a.k.slot_stride, a.k.slot_stride, count,
                    S.data() + h * ld + c, ld);
    });
  };
  if (a.k.slot_stride > a.k.head_stride) {
    // The value pass reads a KV head's rows, slot_stride apart: a stride the hardware prefetcher
    // does not follow across 4 KiB pages, so each row's line would be a demand miss. The slot's V
    // is requested here instead, as its K is read, and waits in the cache for the value pass.
    const T* v_page = rows_of(a.v, 0);
    const bool strided_values = a.v.slot_stride > a.v.head_stride;  // V's page NHD too
    for (std::int64_t c = 0; c < rows; ++c) {
      if (strided_values) prefetch_elements(v_page + c * a.v.slot_stride, a.kv_heads * a.v.head_stride);
      for (std::int64_t kh = 0; kh < a.kv_heads; ++kh) scores(c, 1, kh);
    }
  } else {
    for (std::int64_t kh = 0; kh < a.kv_heads; ++kh) scores(0, rows, kh);
  }
  for (std::int64_t h = 0; h < a.q_heads; ++h) {  // online softmax, one contiguous score row per head
    Eigen::Map<Eigen::ArrayXf> s(S.data() + h * ld, rows);
    if constexpr (!std::is_same_v<Bias, no_bias>)
      for (std::int64_t c = 0; c < rows; ++c) s[c] += bias(h, q_position, lo + c);
    online_softmax_step(s, st.row_max[h], st.row_sum[h], st.acc.row(h));
  }
  for (std::int64_t kh = 0; kh < a.kv_heads; ++kh)
    in_blocks_of_four(group, [&]<int N>(std::int64_t g) {
      const std::int64_t h = kh * group + g;
      accumulate_rows<N>(S.data() + h * ld, ld, rows_of(a.v, kh), a.v.slot_stride, rows, v_dim, st.acc.data() + h * v_dim,
                         v_dim);
    });
}

}  // namespace detail

template <class Instance>
void attention_decode(const Instance& inst, const decode_args& a) {
  static_assert(!is_lift_instance<Instance>,
                "grape: cpu::attention_decode takes rotations and score biases; a lift (GRAPE-A) needs lifted keys "
                "in the cache: run it as ALiBi, or through cpu::attention");
  static_assert(attention_takes<Instance>,
                "grape: cpu::attention_decode takes a rotate_qk or score_bias encoding (or a composition); an "
                "add_embedding encoding is added to the input before attention");
  const int d = inst.content_dim();
  const int v_dim = a.v_dim > 0 ? a.v_dim : d;
  const std::vector<std::int64_t> q_pos = detail::check_decode(a, d, v_dim);
  const auto* bias = detail::bias_part(inst);
  constexpr bool has_bias = !std::is_same_v<decltype(bias), const void*>;
  if constexpr (has_bias)
    if (a.q_heads != bias->heads())
      throw input_error("q_heads must equal the encoding's heads (" + std::to_string(bias->heads()) + ")");
  const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(d));
  // The queries in float32, scaled, then turned at their positions (as rotate_qk turns them).
  std::vector<float> q(static_cast<std::size_t>(a.batch * a.q_heads * d));
  detail::with_storage(a.type, [&]<class T>() {
    const T* in = static_cast<const T*>(a.q);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = scale * static_cast<float>(in[i]);
  });
  // rotate_qk's arguments for the queries: one token per sequence, at its position.
  rotate_qk_args queries;
  queries.type = dtype::f32;
  queries.q = {q.data(), q.data(), a.q_heads, static_cast<std::int64_t>(q.size()), a.q_heads * d, a.q_heads * d, d};
  queries.batch = a.batch;
  queries.seq_len = 1;
  queries.position_ids = q_pos.data();
  queries.threads = a.threads;
  if constexpr (rotates_qk_part<Instance>) rotate_qk(rotation_part(inst), queries);
  if constexpr (rotates_by_phase<Instance>)  // the query turned by the phase at its position
    grape_m_rotate_qk(detail::phase_call_of(inst, q_pos, a.q_heads, a.kv_heads).spec,
                      detail::without_positions(queries));
  // A bias that adds whole tiles (TileBias: ALiBi, T5, FoX, GRAPE-AP) gives each work item's keys
  // as one tile row per head: per offset for ALiBi and T5, one suffix sum for GRAPE-AP's path
  // (O(query − first key) terms instead of a path per key).
  constexpr bool tile_bias = requires { requires TileBias<std::remove_cvref_t<decltype(*bias)>>; };
  const auto add_bias = [&] {
    if constexpr (has_bias)
      return [&](std::int64_t h, std::int64_t m, std::int64_t n) {
        return static_cast<float>(
            bias->bias(static_cast<int>(h), std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n}));
      };
    else
      return detail::no_bias{};
  }();
  // Work items: (sequence, chunk of pages), each an online softmax over its keys for every head;
  // then the chunks of a sequence merge by their log-sum-exps (split-K), so one long sequence
  // keeps every thread busy and each page is read in one sweep.
  const std::int64_t chunk = detail::decode_chunk(a.block_size);
  std::int64_t chunks = 1;
  for (std::int64_t b = 0; b < a.batch; ++b) chunks = std::max(chunks, (a.seq_lens[b] + chunk - 1) / chunk);
  const std::int64_t heads = a.q_heads;
  std::vector<float> part_max(static_cast<std::size_t>(a.batch * chunks * heads), -INFINITY);
  std::vector<float> part_sum(part_max.size(), 0.0f), part_acc(part_max.size() * v_dim, 0.0f);
  detail::with_storage(a.type, [&]<class T>() {
    detail::launch_items(a.batch * chunks, 0, a.threads, [&](std::int64_t w, float*) {
      const std::int64_t b = w / chunks, c = w % chunks;
      const std::int64_t first = a.window > 0 ? std::max<std::int64_t>(0, q_pos[b] - a.window + 1) : 0;
      const std::int64_t lo = std::max(c * chunk, first), hi = std::min({(c + 1) * chunk, a.seq_lens[b], q_pos[b] + 1}) - 1;
      if (lo > hi) return;
      detail::decode_state st(heads, v_dim);
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> S(heads, a.block_size);
      const auto sweep = [&](const auto& bias_of) {
        for (std::int64_t j = lo; j <= hi; j = (j / a.block_size + 1) * a.block_size)
          detail::decode_page<T>(a, b, j, std::min(hi, (j / a.block_size + 1) * a.block_size - 1),
                                 q.data() + b * heads * d, d, v_dim, q_pos[b], bias_of, st, S);
      };
      if constexpr (tile_bias) {  // the item's keys at once: one row of a tile per head
        const std::int64_t n = hi - lo + 1;
        std::vector<std::int64_t> keys(static_cast<std::size_t>(n));
        std::iota(keys.begin(), keys.end(), lo);
        std::vector<float> row(static_cast<std::size_t>(heads * n), 0.0f);
        for (std::int64_t h = 0; h < heads; ++h)
          bias->add_tile(static_cast<int>(h), &q_pos[b], 1, keys.data(), n, row.data() + h * n, n);
        sweep([&](std::int64_t h, std::int64_t, std::int64_t j) { return row[h * n + j - lo]; });
      } else {
        sweep(add_bias);
      }
      const std::size_t at = static_cast<std::size_t>(w * heads);
      for (std::int64_t h = 0; h < heads; ++h) {
        part_max[at + h] = st.row_max[h];
        part_sum[at + h] = st.row_sum[h];
        for (int i = 0; i < v_dim; ++i) part_acc[(at + h) * v_dim + i] = st.acc(h, i);
      }
    }, /*min_parallel=*/2);
  });
  std::vector<float> out(static_cast<std::size_t>(a.batch * heads * v_dim));
  for (std::int64_t b = 0; b < a.batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h) {
      float top = -INFINITY, sum = 0;
      for (std::int64_t c = 0; c < chunks; ++c) top = std::max(top, part_max[(b * chunks + c) * heads + h]);
      float* o = out.data() + (b * heads + h) * v_dim;
      for (std::int64_t c = 0; top > -INFINITY && c < chunks; ++c) {
        const std::size_t at = static_cast<std::size_t>((b * chunks + c) * heads + h);
        const float weight = std::exp(part_max[at] - top);
        sum += weight * part_sum[at];
        for (int i = 0; i < v_dim; ++i) o[i] += weight * part_acc[at * v_dim + i];
      }
      const float inv = sum > 0 ? 1.0f / sum : 0.0f;  // no key seen: the output is 0
      for (int i = 0; i < v_dim; ++i) o[i] *= inv;
      if (a.lse) a.lse[h * a.batch + b] = top + std::log(sum);
    }
  detail::from_float(a.type, out, 1.0f, a.out);
}

}  // namespace grape::cpu
