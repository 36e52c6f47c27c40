#pragma once
// Fused attention on the device for an encoding instance: cpu::attention(instance, args)'s road on
// CUDA. Host code (C++20, the host compiler):
//
//   const grape::cuda::device_attention enc(E::make(params));   // tables and bias arrays uploaded once
//   grape::cuda::attention(enc, args, total_tokens, device_error_flag, stream);
//
// args is the CPU call's attention_args (common/attention_args.hpp) with device pointers (Q, K, V, out, lse, cu_seqlens,
// positions; with cu_seqlens, seq_len the longest sequence). The rotation, if any, turns Q and K
// into scratch: the rotary_spec kernels for rotation planes, the representation's view otherwise,
// GRAPE-M's kernel on the phases gathered at each token's position for contextual GRAPE-M;
// the bias, if any, becomes the flash loop's functor (instance_scores.hpp: ALiBi, T5, FoX, gated
// GRAPE-A, GRAPE-AP, or a bias of your own through its score view); then the flash attention runs
// (flash_attention_cuda.hpp). What the library has not compiled for your types, one line each in a .cu
// file (nvcc -std=c++20) instantiates: GRAPE_CUDA_ENCODE_QK(R, layout) (encode_qk_cuda.cuh) for a
// representation other than rotation planes, GRAPE_FLASH_SCORE_VIEW(View) (flash_launch.cuh) for
// a score view. Host checks throw grape::input_error before anything is allocated or launched; a
// bad position or cu_seqlens sets *device_error_flag (read it before the output). Scratch (rotated
// Q and K, positions) is stream-ordered (stream_scratch.hpp) and freed after the call.
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/attention_args.hpp"
#include "common/phase_rotation.hpp"
#include "cuda/attention_host_steps.hpp"
#include "cuda/device_arrays.hpp"
#include "cuda/device_view.hpp"
#include "cuda/flash_attention_cuda.hpp"
#include "cuda/flash_dispatch.hpp"
#include "cuda/flash_launch.hpp"
#include "cuda/grape_m_cuda.hpp"
#include "cuda/instance_scores.hpp"
#include "cuda/phase_gather_launch.hpp"
#include "cuda/stream_scratch.hpp"
#include "grape/rep/rotation_planes.hpp"

namespace grape::cuda {

/// The instance rotation on the device (encode_qk_cuda.cuh defines it; GRAPE_CUDA_ENCODE_QK instantiates).
template <class R, layout_kind Q, layout_kind K>
void rotate_qk(const device_encoding<R, Q, K>& enc, const kernel::rotate_qk_args& args, std::int64_t total_tokens,
               int* device_error_flag, cudaStream_t stream);
template <class R, layout_kind Q, layout_kind K>
void rotate_qk_backward(const device_encoding<R, Q, K>& enc, const kernel::rotate_qk_args& args,
                        std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream);

namespace detail {

template <class I>
struct device_rotation_of {
  using type = std::monostate;
};
template <class R, layout_kind Q, layout_kind K>
struct device_rotation_of<rotate_instance<R, Q, K>> {
  using type = device_encoding<R, Q, K>;
};

/// Rotations the rotary_spec kernels always take (one-axis planes, one layout): no view kernel.
template <class E>
inline constexpr bool spec_rotation = false;
template <layout_kind L>
inline constexpr bool spec_rotation<device_encoding<rotation_planes<1>, L, L>> = true;

/// Device memory for the bias arrays (instance_scores' placement): each copied once, freed with
/// the owner.
class device_placement {
 public:
  template <class T>
  const T* operator()(const std::vector<T>& values) {
    return arrays_.copy(values, "a bias array");
  }

 private:
  device_arrays arrays_;
};

/// Contextual GRAPE-M on the device: its frequencies (device_grape_m) and its phase table.
class device_phase_rotation {
 public:
  device_phase_rotation(const phase_rotation& r, device_placement& place)
      : rotation_{r.num_heads, r.head_dim, r.freq_rows, r.phase_rows, r.length, {}, {}},
        grape_m_(kernel::grape_m_spec_of(r)),
        table_(place(r.phases)) {}
  /// The rotation's shape (its arrays empty: they live on the device).
  const phase_rotation& shape() const { return rotation_; }
  const device_grape_m& grape_m() const { return grape_m_; }
  /// The call's phases from the table, and the table's gradient from theirs.
  phase_gather gather(const kernel::qk_args& qk, std::int64_t tokens, double* call_phases, int* flag) const {
    return {table_call(qk, tokens), table_, call_phases, flag};
  }
  phase_origin origin(const kernel::qk_args& qk, std::int64_t tokens, const double* call_phases,
                      double* origins) const {
    return {table_call(qk, tokens), call_phases, origins};
  }
  phase_scatter scatter(const kernel::qk_args& qk, std::int64_t tokens, const double* call_grads,
                        double* table_grads) const {
    return {table_call(qk, tokens), call_grads, table_grads};
  }

 private:
  phase_table_call table_call(const kernel::qk_args& qk, std::int64_t tokens) const {
    return {rotation_.phase_rows, rotation_.length, position_source_of(qk), tokens};
  }
  phase_rotation rotation_;
  device_grape_m grape_m_;
  const double* table_ = nullptr;
};
template <>
struct device_rotation_of<phase_rotation> {
  using type = device_phase_rotation;
};

/// The rotation of an instance, forward or backward, through the rotary_spec kernels or the view.
template <class Rotation>
void rotate(const Rotation& rotation, const kernel::rotate_qk_args& r, std::int64_t total_tokens, int* flag,
            cudaStream_t stream, bool backward) {
  const rotary_spec* spec = rotation.plane_spec();
  if constexpr (!spec_rotation<Rotation>) {
    if (!spec)
      return backward ? rotate_qk_backward(rotation, r, total_tokens, flag, stream)
                      : rotate_qk(rotation, r, total_tokens, flag, stream);
  }
  backward ? rotate_qk_backward(*spec, *rotation.plane_tables(), r, total_tokens, flag, stream)
           : rotate_qk(*spec, *rotation.plane_tables(), r, total_tokens, flag, stream);
}

}  // namespace detail

/// An encoding instance ready for cuda::attention: its rotation's device tables or view and its
/// bias's functor over device arrays, built once per model.
template <class Instance>
class device_attention {
  static_assert(kernel::attention_takes<Instance>,
                "grape: cuda::attention takes a rotate_qk or score_bias encoding (or a composition); an add_embedding "
                "encoding is added to the input before attention");
  static constexpr bool rotates = rotates_qk_part<Instance>;
  static constexpr bool by_phase = kernel::rotates_by_phase<Instance>;

 public:
  using rotation_type = typename detail::device_rotation_of<
      std::remove_cvref_t<decltype(rotation_part(std::declval<const Instance&>()))>>::type;
  using scores_type =
      decltype(instance_scores(std::declval<const Instance&>(), std::declval<detail::device_placement&>()));

  explicit device_attention(const Instance& inst)
      : head_dim_(inst.content_dim()), heads_(bias_heads(inst)), scores_(instance_scores(inst, place_)) {
    if constexpr (rotates) rotation_.emplace(rotation_part(inst));
    if constexpr (by_phase) rotation_.emplace(inst, place_);
  }

  int head_dim() const { return head_dim_; }
  /// The query heads the bias (or a phase rotation's rows per head) is defined for, or 0 (any).
  int heads() const { return heads_; }
  const scores_type& scores() const { return scores_; }
  const rotation_type* rotation() const { return rotation_ ? &*rotation_ : nullptr; }

 private:
  static int bias_heads(const Instance& inst) {
    if constexpr (is_lift_instance<Instance>) return static_cast<int>(inst.reps.size());
    else if constexpr (by_phase) return inst.per_head() ? inst.num_heads : 0;
    else if constexpr (!has_score_bias<Instance>) return 0;
    else return score_bias_of(inst).heads();
  }

  int head_dim_ = 0, heads_ = 0;
  detail::device_placement place_;
  scores_type scores_;
  std::optional<rotation_type> rotation_;
};

template <class Instance>
device_attention(const Instance&) -> device_attention<Instance>;

namespace detail {

/// Q and K of `qk` turned by the instance's rotation into q_out and k_out (the inputs' strides):
/// the rotary_spec kernels or the view, or for contextual GRAPE-M its kernel on the phases
/// gathered at each token's position into `phases` (phase rows × total_tokens doubles).
template <class Instance>
void encode_into(const device_attention<Instance>& enc, const kernel::qk_args& qk, std::int64_t total_tokens,
                 void* q_out, void* k_out, double* phases, int* flag, cudaStream_t stream) {
  if constexpr (kernel::rotates_by_phase<Instance>) {
    launch_phase_gather(enc.rotation()->gather(qk, total_tokens, phases, flag), stream);
    grape_m_rotate_qk(enc.rotation()->grape_m(), rotation_into(kernel::without_positions(qk), q_out, k_out),
                      {phases, enc.rotation()->shape().phase_rows}, total_tokens, flag, stream);
  } else if constexpr (!std::is_same_v<typename device_attention<Instance>::rotation_type, std::monostate>) {
    rotate(*enc.rotation(), rotation_into(qk, q_out, k_out), total_tokens, flag, stream, false);
  }
}

/// A call's encoded operands on the device: Q and K rotated into scratch (when the instance
/// rotates), the bias positions written (when the bias needs them), the flash operands over them.
/// Every host check runs before the first allocation.
template <class Instance>
struct encoded_args {
  using encoding = device_attention<Instance>;
  static constexpr bool has_bias = !std::is_same_v<typename encoding::scores_type, no_scores>;
  static constexpr bool by_phase = kernel::rotates_by_phase<Instance>;
  static constexpr bool rotates = !std::is_same_v<typename encoding::rotation_type, std::monostate>;
  stream_scratch q_rot, k_rot, positions, phases;
  flash_args ops;

  encoded_args(const encoding& enc, const kernel::attention_args& a, std::int64_t total_tokens, int* flag,
               cudaStream_t stream)
      : q_rot(checked_bytes(enc, a, total_tokens, flag, a.qk.q.size), stream),
        k_rot(rotates ? static_cast<std::size_t>(a.qk.k.size) * element_bytes(a.qk.type) : 0, stream),
        positions(has_bias && has_bias_positions(a.qk) && total_tokens > 0 ? static_cast<std::size_t>(total_tokens) * 8
                                                                             : 0,
                  stream),
        phases(by_phase ? static_cast<std::size_t>(phase_rows(enc) * total_tokens) * sizeof(double) : 0, stream) {
    encode_into(enc, a.qk, total_tokens, q_rot.get(), k_rot.get(), call_phases(), flag, stream);
    auto* position_of = static_cast<std::int64_t*>(positions.get());
    if (position_of)
      launch_bias_positions(position_source_of(a.qk), total_tokens, a.qk.max_position, position_of, flag, stream);
    ops = attention_operands(a, rotates ? q_rot.get() : a.qk.q.in, rotates ? k_rot.get() : a.qk.k.in, position_of,
                             enc.head_dim(), total_tokens, flag);
  }

  /// Contextual GRAPE-M: the call's phases [rows, total_tokens].
  double* call_phases() const { return static_cast<double*>(phases.get()); }
  static int phase_rows(const encoding& enc) {
    if constexpr (by_phase) return enc.rotation()->shape().phase_rows;
    else return 0;
  }

 private:
  /// Runs the checks (attention_operands on the inputs, the bias's or the phase rows' heads),
  /// then sizes Q's scratch.
  static std::size_t checked_bytes(const encoding& enc, const kernel::attention_args& a, std::int64_t total_tokens,
                                   int* flag, std::int64_t q_size) {
    attention_operands(a, a.qk.q.in, a.qk.k.in, nullptr, enc.head_dim(), total_tokens, flag);
    if constexpr (has_bias)
      require(enc.heads() == a.qk.q.heads, "q.heads: must equal the encoding's heads (" + std::to_string(enc.heads()) +
                                               ")");
    if constexpr (by_phase) kernel::check_phase_heads(enc.rotation()->shape(), a.qk.q.heads, a.qk.k.heads);
    return rotates ? static_cast<std::size_t>(q_size) * element_bytes(a.qk.type) : 0;
  }
};

}  // namespace detail

/// O = softmax(scale·E_q(Q)·E_k(K)ᵀ + B + mask)·V for the instance on the device. total_tokens:
/// batch·seq_len padded, the packed tokens with cu_seqlens (then seq_len the longest sequence).
template <class Instance>
void attention(const device_attention<Instance>& enc, const kernel::attention_args& a, std::int64_t total_tokens,
               int* device_error_flag, cudaStream_t stream) {
  const detail::encoded_args<Instance> encoded(enc, a, total_tokens, device_error_flag, stream);
  detail::launch_flash(encoded.ops, enc.scores(), stream);
}

/// Backward: dL/dQ, dL/dK, dL/dV (g: dense, the storage type, as cpu::attention_backward's) from
/// dL/dO, with the forward's call (its out and lse filled); K and V must share their head count.
/// The rotation is applied again, the flash backward gives the rotated operands' gradients and
/// the rotation's transpose takes them back. g.grad_bias (device memory, the CPU's layout): the
/// built-in biases' parameter gradient (ALiBi, T5, FoX, gated GRAPE-A, GRAPE-AP's dL/dp: float64
/// atomics, the last bits vary). Contextual GRAPE-M:
/// g.grad_inv_freq its dL/dθ [freq_rows, planes] and g.grad_phases its dL/dΦ [phase_rows, length]
/// (float64 device memory, float64 atomics: the last bits vary), for dense Q and K
/// ([tokens, heads, head_dim]). Rotation planes (RoPE and every schedule, M-RoPE): g.grad_inv_freq
/// their dL/dθ [rotary_dim / 2] (cuda::rotate_qk_inv_freq_grad, float64, the same bits every run);
/// another rotation (a representation's view) has none.
template <class Instance>
void attention_backward(const device_attention<Instance>& enc, const kernel::attention_args& a,
                        const kernel::attention_grad_args& g, std::int64_t total_tokens, int* device_error_flag,
                        cudaStream_t stream) {
  using encoded_type = detail::encoded_args<Instance>;
  constexpr bool rotates = encoded_type::rotates, by_phase = encoded_type::by_phase;
  const bool phase_params = by_phase && (g.grad_inv_freq || g.grad_phases);
  if constexpr (!by_phase) {
    bool planes = false;
    if constexpr (rotates) planes = enc.rotation()->plane_spec() != nullptr;
    detail::require(g.grad_inv_freq == nullptr || planes,
                    "grad_inv_freq: only a rotation whose planes each follow one position axis has frequencies");
    detail::require(g.grad_phases == nullptr, "grad_phases: only a rotation by per-token phases has phases (pass null)");
  }
  if (phase_params) {
    const auto dense = [&](const kernel::qk_tensor& t) {
      return t.head_stride == enc.head_dim() && t.token_stride == t.heads * enc.head_dim();
    };
    detail::require(dense(a.qk.q) && dense(a.qk.k),
                    "grad_inv_freq, grad_phases: cuda::attention_backward gives contextual GRAPE-M's parameter "
                    "gradients for dense Q and K ([tokens, heads, head_dim]) only");
  }
  const encoded_type encoded(enc, a, total_tokens, device_error_flag, stream);
  const std::size_t bytes = element_bytes(a.qk.type);
  detail::stream_scratch dq_rot(rotates ? static_cast<std::size_t>(total_tokens * a.qk.q.heads) * enc.head_dim() * bytes
                                        : 0,
                                stream);
  detail::stream_scratch dk_rot(rotates ? static_cast<std::size_t>(total_tokens * a.qk.k.heads) * enc.head_dim() * bytes
                                        : 0,
                                stream);
  const flash_grads fg{g.grad_out, rotates ? dq_rot.get() : g.grad_q, rotates ? dk_rot.get() : g.grad_k, g.grad_v,
                       g.grad_bias};
  detail::launch_flash_backward(encoded.ops, fg, enc.scores(), stream);
  if constexpr (by_phase) {
    const int rows = encoded_type::phase_rows(enc);
    const device_phases phases{encoded.call_phases(), rows};
    if (phase_params) {  // dL/dθ (from each sequence's first phase), dL/dΦ per call token, then the table's
      const std::size_t per_call = static_cast<std::size_t>(rows * total_tokens) * sizeof(double);
      detail::stream_scratch per_token(g.grad_phases ? per_call : 0, stream), origins(per_call, stream);
      detail::launch_phase_origin(
          enc.rotation()->origin(a.qk, total_tokens, encoded.call_phases(), static_cast<double*>(origins.get())), stream);
      grape_m_param_grads(enc.rotation()->grape_m(), kernel::without_positions(a.qk),
                          {encoded.call_phases(), rows, static_cast<const double*>(origins.get())}, dq_rot.get(),
                          dk_rot.get(), {g.grad_inv_freq, static_cast<double*>(per_token.get())}, total_tokens,
                          device_error_flag, stream);
      if (g.grad_phases)
        detail::launch_phase_scatter(
            enc.rotation()->scatter(a.qk, total_tokens, static_cast<double*>(per_token.get()), g.grad_phases), stream);
    }
    grape_m_rotate_qk_backward(enc.rotation()->grape_m(),
                               kernel::without_positions(rotation_back(a.qk, dq_rot.get(), dk_rot.get(), g.grad_q,
                                                                            g.grad_k, total_tokens, enc.head_dim())),
                               phases, total_tokens, device_error_flag, stream);
  } else if constexpr (rotates) {
    const kernel::rotate_qk_args back =
        rotation_back(a.qk, dq_rot.get(), dk_rot.get(), g.grad_q, g.grad_k, total_tokens, enc.head_dim());
    if (g.grad_inv_freq)  // from the inputs and dL/d(rotated Q, K), before the transpose takes them back
      rotate_qk_inv_freq_grad(*enc.rotation()->plane_spec(), *enc.rotation()->plane_tables(), kernel::rotation_of(a.qk), back,
                              g.grad_inv_freq, total_tokens, device_error_flag, stream,
                              kernel::position_origin::sequence_start);
    detail::rotate(*enc.rotation(), back, total_tokens, device_error_flag, stream, true);
  }
}

}  // namespace grape::cuda
