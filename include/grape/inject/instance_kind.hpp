#pragma once
// What an encoding's instance is, asked in one place. The injection tag of encoding<G, R, I> makes
// the instance (rotate_qk → rotate_instance, lift_qk → lift_instance, rotate_by_phase →
// phase_rotation, score_bias → bias_instance, add_embedding → embedding_instance, compose →
// composed_instance), and this trait maps each instance type back to its kind. The kernels (CPU and
// CUDA), the checker's kernel laws and the Python bindings branch on it, not on an instance's member
// names (docs/design.md, "One kind, asked in one place"):
//
//   if constexpr (grape::is_lift_instance<I>) ...             // Q and K lifted per head (GRAPE-A)
//   if constexpr (grape::rotates_qk_part<I>) ...     // a rotation, alone or with a bias
//
// A new instance type needs its specialisation here (or beside its definition); anything else is
// instance_kind::unknown, which no kernel takes.
#include <type_traits>

#include "grape/inject/add_embedding.hpp"
#include "grape/inject/compose.hpp"
#include "grape/inject/lift_qk.hpp"
#include "grape/inject/rotate_by_phase.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/inject/score_bias.hpp"

namespace grape {

enum class instance_kind {
  unknown,         // not an instance grape knows
  none,            // attention without an encoding (cpu::no_encoding)
  rotation,        // Q and K rotated per token (rotate_instance)
  lift,            // Q and K lifted to head_dim + 2 channels per head (lift_instance)
  phase_rotation,  // Q and K rotated by per-token phases (phase_rotation)
  score_bias,      // b_h(m, n) added to the logits (bias_instance)
  embedding,       // added to the input, before attention (embedding_instance)
  composition,     // a rotation and a score bias (composed_instance)
};

template <class I>
struct instance_traits {
  static constexpr instance_kind kind = instance_kind::unknown;
};
template <class R, layout_kind Q, layout_kind K>
struct instance_traits<rotate_instance<R, Q, K>> {
  static constexpr instance_kind kind = instance_kind::rotation;
};
template <class R>
struct instance_traits<lift_instance<R>> {
  static constexpr instance_kind kind = instance_kind::lift;
};
template <>
struct instance_traits<phase_rotation> {
  static constexpr instance_kind kind = instance_kind::phase_rotation;
};
template <class B>
struct instance_traits<bias_instance<B>> {
  static constexpr instance_kind kind = instance_kind::score_bias;
};
template <class T>
struct instance_traits<embedding_instance<T>> {
  static constexpr instance_kind kind = instance_kind::embedding;
};
template <class Rotation, class Bias>
struct instance_traits<composed_instance<Rotation, Bias>> {
  static constexpr instance_kind kind = instance_kind::composition;
};

template <class I>
inline constexpr instance_kind kind_of = instance_traits<std::remove_cvref_t<I>>::kind;

/// Q and K lifted per head (GRAPE-A): no rotation_part, no decode (the cache would need lifted keys).
template <class I>
inline constexpr bool is_lift_instance = kind_of<I> == instance_kind::lift;
/// A rotation of Q and K, alone or composed with a score bias: rotation_part(inst) is it.
template <class I>
inline constexpr bool rotates_qk_part = kind_of<I> == instance_kind::rotation || kind_of<I> == instance_kind::composition;
/// A rotation by per-token phases (contextual GRAPE-M).
template <class I>
inline constexpr bool is_phase_rotation = kind_of<I> == instance_kind::phase_rotation;
/// A score bias, alone or composed with a rotation: score_bias_of(inst) is it.
template <class I>
inline constexpr bool has_score_bias = kind_of<I> == instance_kind::score_bias || kind_of<I> == instance_kind::composition;
/// Added to the input embedding, before attention.
template <class I>
inline constexpr bool adds_embedding = kind_of<I> == instance_kind::embedding;
/// The fused attention takes it: every kind but an embedding (and unknown types).
template <class I>
inline constexpr bool enters_attention = kind_of<I> != instance_kind::unknown && kind_of<I> != instance_kind::embedding;

/// The bias object of an instance with a score bias (a composed instance's bias part).
template <class I>
  requires has_score_bias<I>
const auto& score_bias_of(const I& inst) {
  if constexpr (kind_of<I> == instance_kind::composition) return inst.bias.bias;
  else return inst.bias;
}

}  // namespace grape
