#pragma once
// Fused attention with the encoding inside, on the CPU:
//
//   O = softmax(scale·E_q(Q)·E_k(K)ᵀ + B + mask)·V        cpu::attention(E::make(params), args)
//
// computed flash-style (cpu/flash_loop.hpp): key tiles of 128 against blocks of 256 queries,
// online softmax, float32 accumulation, never a T×T buffer; for bf16 storage on a CPU with
// AVX512-BF16 the two products take the encoded Q and K and the probabilities rounded to bf16
// (cpu/matmul_path.hpp). The encoding is the instance: a rotation (RoPE and every rotate_qk
// type, through cpu::rotate_qk on Q once and on K once), a lift (GRAPE-A, through cpu::lift_qk:
// head_dim + 2 channels whose dot product carries the bias), a rotation by per-token phases
// (contextual GRAPE-M, through cpu::grape_m_rotate_qk), a score bias (ALiBi, T5, FoX, or a
// user's: bias(h, m, n) added per tile element) or a composition (RoPE + ALiBi).
// Tokens, batches (padded or varlen cu_seqlens), positions (ids or offsets) and storage types are
// rotate_qk's (args.qk); V has the tokens of K. GQA: Q heads are a multiple of K's and V's.
// Memory beyond the output: float32 copies of Q, K and V (O(T·H·d)); the mask uses each token's
// index in its sequence (causal: key index <= query index; window w: fewer than w apart), the
// encoding its position. Bad arguments throw grape::input_error naming the argument, before any
// write.
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/attention_args.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/encode_qk.hpp"
#include "cpu/flash_loop.hpp"
#include "cpu/lift_qk.hpp"
#include "cpu/matmul_path.hpp"
#include "cpu/phase_attention.hpp"
#include "cpu/rotate_qk.hpp"
#include "cpu/storage_dispatch.hpp"
#include "grape/detail/error.hpp"
#include "grape/inject/offset_tile.hpp"

namespace grape::cpu {

namespace detail {

/// Sequences of a call: first token and length of each.
struct sequences {
  std::vector<std::int64_t> first, len;
  std::int64_t total = 0;
};
/// `what` names the tokens in messages ("" for Q's, "keys." for args.keys').
sequences sequences_of(const qk_args& a, const char* what = "");

/// Checks an operand's strides against its size; throws naming `name`.
void check_operand(const qk_tensor& t, const sequences& s, const qk_args& a, int dim, const char* name);

/// Position of every token on axis 0 (ids, offsets or index), each checked in [0, max_position).
std::vector<std::int64_t> positions_of(const qk_args& a, const sequences& s, const char* what = "");

/// rotate_qk's arguments for Q alone (no K), and for K alone on the keys' tokens (args.keys' layout
/// and positions when given, else Q's).
rotate_qk_args query_args(const attention_args& a);
rotate_qk_args key_args(const attention_args& a);

/// A call's sequences: the queries' and the keys' (the same tokens unless args.keys is set).
struct call_sequences {
  sequences q, k;
};

/// Every argument check of cpu::attention that does not depend on the encoding.
call_sequences check_attention(const attention_args& a, int head_dim, int v_dim);

/// The flash loop's view of sequence b of a call: key count and mask shift when the keys have
/// tokens of their own (flash_sequence::k_len, key_shift).
inline void set_keys(flash_sequence& seq, const attention_args& a, const call_sequences& s, std::size_t b) {
  if (!a.keys) return;
  seq.k_len = s.k.len[b];
  seq.key_shift = s.k.len[b] - s.q.len[b];
}

/// Operand t as float32 [total, heads, dim], times `scale`.
template <class T>
std::vector<float> gather(const qk_tensor& t, const qk_args& a, const sequences& s, int dim, float scale) {
  std::vector<float> out(static_cast<std::size_t>(s.total * t.heads * dim));
  const T* in = static_cast<const T*>(t.in);
  for (std::size_t b = 0; b < s.first.size(); ++b)
    for (std::int64_t i = 0; i < s.len[b]; ++i) {
      const std::int64_t token = s.first[b] + i;
      const std::int64_t row = a.cu_seqlens ? token * t.token_stride
                                            : static_cast<std::int64_t>(b) * t.batch_stride + i * t.token_stride;
      for (std::int64_t h = 0; h < t.heads; ++h)
        for (int c = 0; c < dim; ++c)
          out[static_cast<std::size_t>((token * t.heads + h) * dim + c)] = scale * static_cast<float>(in[row + h * t.head_stride + c]);
    }
  return out;
}

/// rotate_qk's arguments for float32 copies [total, heads, d] of Q and K, encoded in place (an
/// operand with no heads, as query_args' K and key_args' Q, stays absent).
rotate_qk_args contiguous_f32(const qk_args& a, float* q, float* k, int d);

/// Writes float32 values into a contiguous array of storage type `type`, times `scale`.
void from_float(dtype type, const std::vector<float>& x, float scale, void* out);

/// The bias of one sequence (the call's tokens from `first`) as the flash loop asks for it: per
/// logit, per tile where the encoding's bias has add_tile (TileBias: ALiBi, T5, FoX), and as a
/// Toeplitz tile's distinct values where it gives them (OffsetTileBias: ALiBi, T5).
template <class Inputs>
struct sequence_bias {
  using bias_type = std::remove_cvref_t<std::remove_pointer_t<typename Inputs::bias_pointer>>;
  const Inputs& in;
  std::int64_t first = 0, key_first = 0;  // the sequence's first query token, and first key token
  float operator()(std::int64_t h, std::int64_t i, std::int64_t j) const {
    return in.bias_at(h, first + i, key_first + j);
  }
  void add_tile(std::int64_t h, std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t cols, float* S,
                std::int64_t ld) const
    requires TileBias<bias_type>
  {
    in.bias->add_tile(static_cast<int>(h), in.pos.data() + first + i0, rows, in.k_pos.data() + key_first + j0, cols,
                      S, ld);
  }
  bool offset_values(std::int64_t h, std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t cols,
                     float* values) const
    requires OffsetTileBias<bias_type>
  {
    return in.bias->offset_values(static_cast<int>(h), in.pos.data() + first + i0, rows,
                                  in.k_pos.data() + key_first + j0, cols, values);
  }
  /// A bias whose rows are cheaper computed once per query block than once per tile (GRAPE-AP's
  /// suffix sums): the forward asks for the block's rows, then adds each tile from them.
  struct rows_of_block {
    typename bias_type::row_block block;
    const std::int64_t* key_pos;  // the sequence's key positions
    std::int64_t i0;
    void add_tile(std::int64_t, std::int64_t i, std::int64_t rows, std::int64_t j0, std::int64_t cols, float* S,
                  std::int64_t ld) const {
      block.add_tile(i - i0, rows, key_pos + j0, cols, S, ld);
    }
  };
  rows_of_block row_block(std::int64_t h, std::int64_t i0, std::int64_t rows) const
    requires requires(const bias_type& b, const std::int64_t* m) { b.rows_at(0, m, std::int64_t{1}); }
  {
    return {in.bias->rows_at(static_cast<int>(h), in.pos.data() + first + i0, rows), in.k_pos.data() + key_first, i0};
  }
};

/// The flash loop over every sequence, then the output in the storage type. The products run on
/// bf16 tiles where matmul_path_for chooses them and `bf16_allowed` (not for a lift: its bias
/// travels in two channels as large as slope·position, which bf16 would round to 2⁻⁸ of that).
template <class Inputs>
void run_flash(const attention_args& a, const call_sequences& s, const std::vector<float>& q,
               const std::vector<float>& k, std::int64_t k_heads, int qk_dim, const std::vector<float>& v, int v_dim,
               const Inputs& in, bool bf16_allowed = true) {
  std::vector<float> out(static_cast<std::size_t>(s.q.total * a.qk.q.heads * v_dim));
  const bool bf16_products = bf16_allowed && matmul_path_for(a.qk.type) == matmul_path::avx512_bf16;
  for (std::size_t b = 0; b < s.q.first.size(); ++b) {
    const std::int64_t f = s.q.first[b], kf = s.k.first[b];
    flash_sequence seq{q.data() + f * a.qk.q.heads * qk_dim, k.data() + kf * k_heads * qk_dim,
                       v.data() + kf * a.v.heads * v_dim, out.data() + f * a.qk.q.heads * v_dim,
                       a.lse, s.q.total, f, s.q.len[b], a.qk.q.heads, k_heads, a.v.heads, qk_dim, v_dim,
                       a.causal, a.window, bf16_products};
    set_keys(seq, a, s, b);
    if constexpr (Inputs::has_bias)
      flash_sequence_forward(seq, sequence_bias<Inputs>{in, f, kf}, a.qk.threads);
    else
      flash_sequence_forward(seq, no_bias{}, a.qk.threads);
  }
  from_float(a.qk.type, out, 1.0f, a.out);
}

}  // namespace detail

namespace detail {

/// What the forward and the backward start from: the call's sequences (queries' and keys'), its
/// operands in float32 [tokens, heads, dim] (Q times the scale, before any encoding, so a lift's or
/// a bias's term stays unscaled), and the instance's bias with every query's and key's position.
/// Checks the call.
template <class Instance>
struct attention_inputs {
  using bias_pointer = decltype(bias_part(std::declval<const Instance&>()));
  static constexpr bool has_bias = !std::is_same_v<bias_pointer, const void*>;
  int d = 0, v_dim = 0;
  call_sequences seqs;
  const sequences& s;  // the queries'
  float scale = 0;
  std::vector<float> q, k, v;
  bias_pointer bias = nullptr;
  std::vector<std::int64_t> pos, k_pos;  // queries', keys'

  attention_inputs(const Instance& inst, const attention_args& a)
      : d(inst.content_dim()), v_dim(a.v_dim > 0 ? a.v_dim : d), seqs(check_attention(a, d, v_dim)), s(seqs.q),
        scale(a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(d))), bias(bias_part(inst)) {
    if (a.keys && (is_lift_instance<Instance> || rotates_by_phase<Instance>))
      throw input_error("keys: a lift (GRAPE-A) or a rotation by per-token phases (contextual GRAPE-M) takes Q and "
                        "K on the same tokens; turn them first (grape.torch.grape_m_rotate_qk) and pass no encoding");
    const rotate_qk_args ka = key_args(a);
    with_storage(a.qk.type, [&]<class T>() {
      q = gather<T>(a.qk.q, a.qk, seqs.q, d, scale);
      k = gather<T>(a.qk.k, ka, seqs.k, d, 1.0f);
      v = gather<T>(a.v, ka, seqs.k, v_dim, 1.0f);
    });
    if constexpr (has_bias) {
      if (a.qk.q.heads != bias->heads())
        throw input_error("q.heads must equal the encoding's heads (" + std::to_string(bias->heads()) + ")");
      pos = positions_of(a.qk, seqs.q);
      k_pos = a.keys ? positions_of(ka, seqs.k, "keys.") : pos;
    }
  }

  /// The bias of head h between query token i and key token j (indices over the whole call), or 0.
  float bias_at(std::int64_t h, std::int64_t i, std::int64_t j) const {
    if constexpr (has_bias)
      return static_cast<float>(bias->bias(static_cast<int>(h), std::array<std::int64_t, 1>{pos[i]},
                                           std::array<std::int64_t, 1>{k_pos[j]}));
    else
      return 0.0f;
  }

  /// Turns the float32 Q and K by the instance's rotation at their positions (one call, or one for
  /// Q and one for K on tokens of their own); `backward`: by its transpose, on their gradients.
  template <class Rotation>
  void rotate(const Rotation& r, const attention_args& a, float* qd, float* kd, bool backward) const {
    const auto run = [&](const rotate_qk_args& args) { backward ? rotate_qk_backward(r, args) : rotate_qk(r, args); };
    if (!a.keys) return run(contiguous_f32(a.qk, qd, kd, d));
    run(contiguous_f32(query_args(a), qd, nullptr, d));
    run(contiguous_f32(key_args(a), nullptr, kd, d));
  }
};

}  // namespace detail

template <class Instance>
void attention(const Instance& inst, const attention_args& a) {
  static_assert(attention_takes<Instance>,
                "grape: cpu::attention takes a rotate_qk, lift_qk or score_bias encoding (or a composition); an "
                "add_embedding encoding is added to the input before attention");
  detail::attention_inputs<Instance> in(inst, a);
  const int d = in.d;
  const auto& s = in.s;
  if constexpr (is_lift_instance<Instance>) {  // a lift: Q and K lifted per query head (on Q's tokens)
    rotate_qk_args lifted = detail::contiguous_f32(a.qk, in.q.data(), in.k.data(), d);
    lifted.q.out = lifted.k.out = nullptr;
    const std::int64_t heads = a.qk.q.heads, stride = heads * (d + 2);
    std::vector<float> ql(static_cast<std::size_t>(s.total * stride)), kl(ql.size());
    const std::int64_t batch_stride = a.qk.cu_seqlens ? 0 : a.qk.seq_len * stride;
    const lifted_tensor lq{ql.data(), static_cast<std::int64_t>(ql.size()), batch_stride, stride, d + 2};
    const lifted_tensor lk{kl.data(), static_cast<std::int64_t>(kl.size()), batch_stride, stride, d + 2};
    lift_qk(inst, lifted, lq, lk);
    detail::run_flash(a, in.seqs, ql, kl, heads, d + 2, in.v, in.v_dim, in, false);
  } else {
    if constexpr (rotates_qk_part<Instance>)
      in.rotate(rotation_part(inst), a, in.q.data(), in.k.data(), false);
    if constexpr (rotates_by_phase<Instance>) {  // each token turned by its phase (contextual GRAPE-M)
      const detail::phase_call p = detail::phase_call_of(inst, detail::positions_of(a.qk, s), a.qk.q.heads, a.qk.k.heads);
      grape_m_rotate_qk(p.spec, detail::without_positions(detail::contiguous_f32(a.qk, in.q.data(), in.k.data(), d)));
    }
    detail::run_flash(a, in.seqs, in.q, in.k, a.qk.k.heads, d, in.v, in.v_dim, in);
  }
}

}  // namespace grape::cpu
