#pragma once
// The backward of cpu::attention, with the encoding inside:
//
//   cpu::attention(inst, a);                    // a.out and a.lse now hold O and its log-sum-exp
//   cpu::attention_backward(inst, a, grads);    // dL/dQ, dL/dK, dL/dV (+ the encoding's parameters)
//
// from the forward's output and log-sum-exp, recomputing each tile (cpu/flash_backward.hpp): no
// T×T buffer. The encoded operands' gradients go back through the encoding: a rotation's inverse
// (cpu::rotate_qk_backward), a lift's transpose (cpu::lift_qk_backward, K's summed over its query
// heads), the scale. Parameter gradients, accumulated in double: a score bias that gives one
// (BiasWithGradient: ALiBi's slopes, T5's table, FoX's log forget gates, or a user's; or
// BiasWithRowGradient: GRAPE-AP's projections) into grads.grad_bias; rotation planes' frequencies
// dL/dθ_i into grads.grad_inv_freq; for a rotation by per-token phases (contextual GRAPE-M) its
// frequencies dL/dθ [freq_rows, planes] into grad_inv_freq and its phases dL/dΦ [phase_rows,
// length] into grad_phases (a phase read by several tokens gets the sum). The arguments are the
// forward's; bad ones throw grape::input_error before anything is written. For bf16 storage the
// five products run on bf16 tiles where the forward's do (cpu/matmul_path.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cpu/attention.hpp"
#include "cpu/flash_backward.hpp"
#include "cpu/threads.hpp"
#include "grape/inject/score_bias.hpp"
#include "grape/view/kernel_traits.hpp"

namespace grape::cpu {

namespace detail {

/// The checks the backward adds to the forward's.
void check_attention_backward(const attention_args& a, const attention_grad_args& g);

/// A contiguous [count] array of storage type `type` as float32.
std::vector<float> to_float(dtype type, const void* x, std::size_t count);

/// Whether the bias a pointer from bias_part points to gives a parameter gradient (per logit or per row).
template <class P>
struct gives_gradient : std::false_type {};
template <class B>
struct gives_gradient<const B*> : std::bool_constant<BiasWithGradient<B> || BiasWithRowGradient<B>> {};
template <>
struct gives_gradient<const void*> : std::false_type {};
template <class P>
struct gives_tile_gradient : std::false_type {};
template <class B>
struct gives_tile_gradient<const B*>
    : std::bool_constant<requires(const B& b, const std::int64_t* p, const float* g, double* acc) {
        b.accumulate_tile_grad(0, p, std::int64_t{1}, p, std::int64_t{1}, g, std::int64_t{1}, acc);
      }> {};
template <class P>
struct gives_row_gradient : std::false_type {};
template <class B>
struct gives_row_gradient<const B*> : std::bool_constant<BiasWithRowGradient<B>> {};

/// The frequency table of a rotation whose planes each follow one axis, or nothing.
template <class R, layout_kind Q, layout_kind K>
std::optional<rotary_spec> plane_spec_of(const rotate_instance<R, Q, K>& r) {
  return kernel_traits<R>::plane_spec(r);
}

}  // namespace detail

template <class Instance>
void attention_backward(const Instance& inst, const attention_args& a, const attention_grad_args& g) {
  static_assert(attention_takes<Instance>,
                "grape: cpu::attention_backward takes a rotate_qk, lift_qk or score_bias encoding (or a "
                "composition); an add_embedding encoding is added to the input before attention");
  detail::check_attention_backward(a, g);
  detail::attention_inputs<Instance> in(inst, a);
  const int d = in.d, v_dim = in.v_dim;
  const auto& s = in.s;
  auto &q = in.q, &k = in.k;
  const auto& v = in.v;
  [[maybe_unused]] const auto* bias = in.bias;
  constexpr bool bias_gradient = detail::gives_gradient<decltype(in.bias)>::value;
  constexpr bool row_gradient = detail::gives_row_gradient<decltype(in.bias)>::value;
  constexpr bool tile_gradient = detail::gives_tile_gradient<decltype(in.bias)>::value;
  constexpr bool is_rotation = rotates_qk_part<Instance>;
  std::size_t accumulator_size = 0;
  if constexpr (bias_gradient)
    if (g.grad_bias) accumulator_size = bias->grad_accumulator_size();
  if (g.grad_bias && accumulator_size == 0 && !in.has_bias) throw input_error("grad_bias: this encoding has no score bias");
  if (g.grad_bias && accumulator_size == 0)
    throw input_error("grad_bias: this encoding's bias gives no parameter gradient (BiasWithGradient)");
  std::optional<rotary_spec> planes;
  if constexpr (is_rotation) planes = detail::plane_spec_of(rotation_part(inst));
  if (g.grad_inv_freq && !planes && !rotates_by_phase<Instance>)
    throw input_error("grad_inv_freq: only a rotation whose planes each follow one position axis has frequencies");
  if (g.grad_phases && !rotates_by_phase<Instance>)
    throw input_error("grad_phases: only a rotation by per-token phases (rotate_by_phase) has phases");

  const float scale = in.scale;
  const std::int64_t heads = a.qk.q.heads;
  const std::size_t out_count = static_cast<std::size_t>(s.total * heads * v_dim);
  std::vector<float> o = detail::to_float(a.qk.type, a.out, out_count);  // flash_sequence.out (read only here)
  const std::vector<float> dout = detail::to_float(a.qk.type, g.grad_out, out_count);
  std::vector<float> delta(static_cast<std::size_t>(s.total * heads));
  for (std::size_t r = 0; r < delta.size(); ++r)
    for (int c = 0; c < v_dim; ++c) delta[r] += dout[r * v_dim + c] * o[r * v_dim + c];

  const int threads = a.qk.threads > 0 ? a.qk.threads : detail::max_threads();
  std::vector<std::vector<double>> accumulators(accumulator_size ? threads : 0, std::vector<double>(accumulator_size));

  // The products on bf16 tiles where the forward's are (never for a lift: cpu/attention.hpp says why).
  const bool bf16_products = !is_lift_instance<Instance> && matmul_path_for(a.qk.type) == matmul_path::avx512_bf16;
  // The flash backward over every sequence on the encoded operands (K' with k_heads heads).
  const auto run = [&](const std::vector<float>& qe, const std::vector<float>& ke, std::int64_t k_heads, int qk_dim,
                       std::vector<float>& dq, std::vector<float>& dk, std::vector<float>& dv) {
    for (std::size_t b = 0; b < s.first.size(); ++b) {
      const std::int64_t f = s.first[b], kf = in.seqs.k.first[b];
      detail::flash_sequence seq{qe.data() + f * heads * qk_dim, ke.data() + kf * k_heads * qk_dim,
                                 v.data() + kf * a.v.heads * v_dim, o.data() + f * heads * v_dim,
                                 a.lse, s.total, f, s.len[b], heads, k_heads, a.v.heads, qk_dim, v_dim,
                                 a.causal, a.window, bf16_products};
      detail::set_keys(seq, a, in.seqs, b);
      const detail::flash_gradients grads{dout.data() + f * heads * v_dim, delta.data() + f * heads,
                                          dq.data() + f * heads * qk_dim, dk.data() + kf * k_heads * qk_dim,
                                          dv.data() + kf * a.v.heads * v_dim};
      const auto per_logit = [&](int thread, std::int64_t h, std::int64_t i, std::int64_t j, float ds) {
        if constexpr (bias_gradient && !row_gradient)
          bias->accumulate_grad(static_cast<int>(h), std::array<std::int64_t, 1>{in.pos[f + i]},
                                std::array<std::int64_t, 1>{in.k_pos[kf + j]}, ds, accumulators[thread].data());
      };
      // A bias that takes a whole tile's logit gradients (gated GRAPE-A) gets them so, not logit by logit.
      const auto per_tile = [&](int thread, std::int64_t h, std::int64_t i0, std::int64_t rows, std::int64_t j0,
                                std::int64_t cols, const float* ds, std::int64_t ld) {
        if constexpr (tile_gradient)
          bias->accumulate_tile_grad(static_cast<int>(h), in.pos.data() + f + i0, rows, in.k_pos.data() + kf + j0, cols, ds,
                                     ld, accumulators[thread].data());
      };
      const detail::whole_rows per_row{[&](int thread, std::int64_t h, std::int64_t i, const float* ds, std::int64_t len) {
        if constexpr (row_gradient)
          bias->accumulate_row_grad(static_cast<int>(h), in.pos[f + i], in.k_pos.data() + kf, ds, len,
                                    accumulators[thread].data());
      }};
      const auto backward = [&](const auto& accumulate) {
        const auto* wanted = accumulator_size ? &accumulate : nullptr;
        if constexpr (detail::attention_inputs<Instance>::has_bias)
          detail::flash_sequence_backward(
              seq, grads, detail::sequence_bias<detail::attention_inputs<Instance>>{in, f, kf}, wanted, a.qk.threads);
        else
          detail::flash_sequence_backward(seq, grads, detail::no_bias{}, wanted, a.qk.threads);
      };
      if constexpr (row_gradient)
        backward(per_row);
      else if constexpr (tile_gradient)
        backward(detail::with_tiles<decltype(per_logit), decltype(per_tile)>{per_logit, per_tile});
      else
        backward(per_logit);
    }
  };

  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  if constexpr (is_lift_instance<Instance>) {  // Q and K lifted per query head, as the forward
    rotate_qk_args lifted = detail::contiguous_f32(a.qk, q.data(), k.data(), d);
    lifted.q.out = lifted.k.out = nullptr;
    const std::int64_t stride = heads * (d + 2), batch_stride = a.qk.cu_seqlens ? 0 : a.qk.seq_len * stride;
    std::vector<float> ql(static_cast<std::size_t>(s.total * stride)), kl(ql.size()), dql(ql.size()), dkl(ql.size());
    const auto tensor = [&](std::vector<float>& x) {
      return lifted_tensor{x.data(), static_cast<std::int64_t>(x.size()), batch_stride, stride, d + 2};
    };
    lift_qk(inst, lifted, tensor(ql), tensor(kl));
    run(ql, kl, heads, d + 2, dql, dkl, dv);
    rotate_qk_args back = detail::contiguous_f32(a.qk, dq.data(), dk.data(), d);
    back.q.in = back.k.in = nullptr;
    lift_qk_backward(inst, back, tensor(dql), tensor(dkl));
  } else {
    std::vector<float> q_in, k_in;  // the rotation's inputs, for its frequencies' gradient
    if (g.grad_inv_freq && !rotates_by_phase<Instance>) q_in = q, k_in = k;
    if constexpr (is_rotation) in.rotate(rotation_part(inst), a, q.data(), k.data(), false);
    std::optional<detail::phase_call> phases;  // contextual GRAPE-M: the same rotation, then its transpose
    if constexpr (rotates_by_phase<Instance>) {
      phases = detail::phase_call_of(inst, detail::positions_of(a.qk, s), a.qk.q.heads, a.qk.k.heads);
      grape_m_rotate_qk(phases->spec, detail::without_positions(detail::contiguous_f32(a.qk, q.data(), k.data(), d)));
    }
    run(q, k, a.qk.k.heads, d, dq, dk, dv);
    if constexpr (rotates_by_phase<Instance>) {  // its parameters' gradients from the rotated Q and K
      detail::phase_backward(inst, *phases, s.first,
                             detail::without_positions(detail::contiguous_f32(a.qk, q.data(), k.data(), d)), dq.data(),
                             dk.data(), g.grad_inv_freq, g.grad_phases);
    } else if (g.grad_inv_freq && !a.keys) {
      rotate_qk_inv_freq_grad(*planes, detail::contiguous_f32(a.qk, q_in.data(), k_in.data(), d), dq.data(),
                              dk.data(), g.grad_inv_freq, position_origin::sequence_start);
    } else if (g.grad_inv_freq) {
      // Q's and K's tokens apart: each side's share, counted from position 0 (the sequence-start
      // origin's cancellation needs both sides in one sum).
      std::vector<double> key_share(planes->inv_freq.size());
      rotate_qk_inv_freq_grad(*planes, detail::contiguous_f32(detail::query_args(a), q_in.data(), nullptr, d),
                              dq.data(), nullptr, g.grad_inv_freq);
      rotate_qk_inv_freq_grad(*planes, detail::contiguous_f32(detail::key_args(a), nullptr, k_in.data(), d), nullptr,
                              dk.data(), key_share.data());
      for (std::size_t i = 0; i < key_share.size(); ++i) g.grad_inv_freq[i] += key_share[i];
    }
    if constexpr (is_rotation) in.rotate(rotation_part(inst), a, dq.data(), dk.data(), true);
  }
  detail::from_float(a.qk.type, dq, scale, g.grad_q);
  detail::from_float(a.qk.type, dk, 1.0f, g.grad_k);
  detail::from_float(a.qk.type, dv, 1.0f, g.grad_v);
  if (accumulator_size) {
    if constexpr (bias_gradient) {
      for (std::size_t t = 1; t < accumulators.size(); ++t)
        for (std::size_t i = 0; i < accumulator_size; ++i) accumulators[0][i] += accumulators[t][i];
      bias->gradient(accumulators[0].data(), g.grad_bias);
    }
  }
}

}  // namespace grape::cpu
