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
// The encoding: a rotation turns the query at its position (K is already turned in the cache),
// a score bias adds bias(h, query position, j), a composition both; a lift (GRAPE-A) would need
// lifted keys in the cache and is refused at compile time. Float32 arithmetic whatever the
// storage, an online softmax over each page, each K and V page read once per KV head (the query
// heads of a GQA group share it). Bad arguments throw grape::input_error before any write.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/attention.hpp"
#include "cpu/launch.hpp"

namespace grape::cpu {

struct decode_args {
  dtype type = dtype::f32;                     // storage of Q, the cache and the output
  const void* q = nullptr;                     // [batch, q_heads, head_dim], contiguous
  std::int64_t batch = 0;
  std::int64_t q_heads = 0;
  std::int64_t kv_heads = 0;                   // heads of the cache; divides q_heads
  paged_cache k;                               // pages of K (already encoded by rotate_qk's KV write)
  paged_cache v;                               // pages of V
  std::int64_t blocks = 0;                     // blocks in the cache
  std::int64_t block_size = 0;                 // slots per block
  const std::int32_t* block_table = nullptr;   // [batch, max_blocks]: each sequence's blocks in order
  std::int64_t max_blocks = 0;                 // columns of block_table
  const std::int64_t* seq_lens = nullptr;      // [batch]: cached tokens per sequence (>= 1)
  const std::int64_t* q_positions = nullptr;   // [batch] or null: seq_lens[b] − 1
  std::int64_t max_position = std::numeric_limits<std::int64_t>::max();  // query positions must be below
  int v_dim = 0;                               // 0: head_dim
  void* out = nullptr;                         // [batch, q_heads, v_dim], contiguous, storage type
  float* lse = nullptr;                        // [q_heads, batch] log-sum-exp, or null
  std::int64_t window = 0;                     // > 0: keys less than `window` before the query
  float scale = 0;                             // 0: 1/sqrt(head_dim)
  int threads = 0;
};

namespace detail {

/// Every check of attention_decode that does not depend on the encoding; the query positions.
std::vector<std::int64_t> check_decode(const decode_args& a, int head_dim, int v_dim);

/// One KV head's query group of one sequence: the online softmax over its pages.
template <class T, class Bias>
void decode_group(const decode_args& a, std::int64_t b, std::int64_t kh, const float* q, int d, int v_dim,
                  std::int64_t q_position, const Bias& bias, float* out, float* lse_out) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using page = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                          Eigen::OuterStride<>>;
  const std::int64_t group = a.q_heads / a.kv_heads, len = a.seq_lens[b];
  const std::int64_t first = a.window > 0 ? std::max<std::int64_t>(0, q_position - a.window + 1) : 0;
  const std::int64_t last = std::min(len - 1, q_position);  // keys after the query are not seen
  const Eigen::Map<const mat> Q(q, group, d);
  mat acc = mat::Zero(group, v_dim), S(group, a.block_size);
  std::vector<float> row_max(group, -std::numeric_limits<float>::infinity()), row_sum(group, 0.0f);
  for (std::int64_t j0 = first - first % a.block_size; first <= last && j0 <= last; j0 += a.block_size) {
    const std::int64_t block = a.block_table[b * a.max_blocks + j0 / a.block_size];
    const std::int64_t lo = std::max(j0, first), hi = std::min(j0 + a.block_size - 1, last);
    const std::int64_t rows = hi - lo + 1, slot = lo - j0;
    const T* k = static_cast<const T*>(a.k.data) + block * a.k.block_stride + slot * a.k.slot_stride + kh * a.k.head_stride;
    const T* v = static_cast<const T*>(a.v.data) + block * a.v.block_stride + slot * a.v.slot_stride + kh * a.v.head_stride;
    const page K(k, rows, d, Eigen::OuterStride<>(a.k.slot_stride));
    const page V(v, rows, v_dim, Eigen::OuterStride<>(a.v.slot_stride));
    if constexpr (std::is_same_v<T, float>)
      S.leftCols(rows).noalias() = Q * K.transpose();
    else
      S.leftCols(rows).noalias() = Q * K.template cast<float>().transpose();
    for (std::int64_t g = 0; g < group; ++g) {
      float top = row_max[g];
      for (std::int64_t c = 0; c < rows; ++c) {
        S(g, c) += bias(kh * group + g, q_position, lo + c);
        top = std::max(top, S(g, c));
      }
      if (top == -std::numeric_limits<float>::infinity()) {  // a bias of −∞ everywhere so far
        S.row(g).head(rows).setZero();
        continue;
      }
      const float rescale = std::exp(row_max[g] - top);
      float sum = 0;
      for (std::int64_t c = 0; c < rows; ++c) sum += S(g, c) = std::exp(S(g, c) - top);
      row_sum[g] = row_sum[g] * rescale + sum;
      acc.row(g) *= rescale;
      row_max[g] = top;
    }
    if constexpr (std::is_same_v<T, float>)
      acc.noalias() += S.leftCols(rows) * V;
    else
      acc.noalias() += S.leftCols(rows) * V.template cast<float>();
  }
  for (std::int64_t g = 0; g < group; ++g) {
    const float inv = row_sum[g] > 0 ? 1.0f / row_sum[g] : 0.0f;
    for (int c = 0; c < v_dim; ++c) out[g * v_dim + c] = acc(g, c) * inv;
    if (lse_out) lse_out[(kh * group + g) * a.batch] = row_max[g] + std::log(row_sum[g]);
  }
}

}  // namespace detail

template <class Instance>
void attention_decode(const Instance& inst, const decode_args& a) {
  static_assert(!requires { inst.reps; },
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
  if constexpr (requires { rotation_part(inst).rep; }) {
    rotate_qk_args r;
    r.type = dtype::f32;
    r.q = {q.data(), q.data(), a.q_heads, static_cast<std::int64_t>(q.size()), a.q_heads * d, a.q_heads * d, d};
    r.batch = a.batch;
    r.seq_len = 1;
    r.position_ids = q_pos.data();
    r.threads = a.threads;
    rotate_qk(rotation_part(inst), r);
  }
  const auto add_bias = [&](std::int64_t h, std::int64_t m, std::int64_t n) -> float {
    if constexpr (has_bias)
      return static_cast<float>(
          bias->bias(static_cast<int>(h), std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n}));
    else
      return 0.0f;
  };
  std::vector<float> out(static_cast<std::size_t>(a.batch * a.q_heads * v_dim));
  const std::int64_t group = a.q_heads / a.kv_heads;
  detail::with_storage(a.type, [&]<class T>() {
    detail::launch_items(a.batch * a.kv_heads, 0, a.threads, [&](std::int64_t w, float*) {
      const std::int64_t b = w / a.kv_heads, kh = w % a.kv_heads;
      detail::decode_group<T>(a, b, kh, q.data() + (b * a.q_heads + kh * group) * d, d, v_dim, q_pos[b], add_bias,
                              out.data() + (b * a.q_heads + kh * group) * v_dim, a.lse ? a.lse + b : nullptr);
    }, /*min_parallel=*/2);  // few items, each a whole sequence's pages
  });
  detail::from_float(a.type, out, 1.0f, a.out);
}

}  // namespace grape::cpu
