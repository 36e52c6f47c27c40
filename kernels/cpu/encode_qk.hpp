#pragma once
// rotate_qk for an encoding instance: an encoding type's view run by the CPU kernel.
//
//   cpu::rotate_qk(E::make(params), args);   // E: any encoding whose injection is rotate_qk
//
// takes the same rotate_qk_args as the rotary_spec entry (layouts and strides, varlen, position
// ids or offsets, GQA, partial rotary, f32/f16/bf16, the fused QK-norm and paged KV-cache write)
// and the same validation (one plan, make_instance_plan). Rotation-plane instances whose planes
// each follow one position axis run the specialised packet kernels through kernel_traits (the
// instance becomes a rotary_spec: RoPE, M-RoPE, axial, a user's own frequencies); every other
// representation runs the generic body (encode_qk_item.hpp) over the device-safe view its
// `view()` returns. A user type needs nothing beyond that view.
#include <Eigen/Core>
#include <optional>
#include <vector>

#include "cpu/encode_qk_item.hpp"
#include "cpu/launch.hpp"
#include "cpu/rotate_qk.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "grape/inject/compose.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/view/concepts.hpp"
#include "grape/view/kernel_traits.hpp"

namespace grape::cpu {

namespace detail {

template <class R>
constexpr void require_view() {
  static_assert(KernelRepresentation<R>,
                "grape: this representation has no device-safe view: give it `view() const` "
                "returning a RepresentationView (grape/view/concepts.hpp) to run it in the kernels");
}

template <class Storage, class R, layout_kind Q, layout_kind K>
void launch_instance(const rotate_plan& p, const rotate_instance<R, Q, K>& inst) {
  using view_type = decltype(inst.rep.view());
  const encode_token<Storage, view_type, Q, K> item{p, inst.rep.view()};
  launch_items(p.total_tokens, item.scratch_floats(p, item.view), p.threads, item);
}

template <class R, layout_kind Q, layout_kind K>
void run_instance(const rotate_instance<R, Q, K>& inst, const rotate_qk_args& args, bool backward) {
  owned_plan o = make_instance_plan(shape_of(inst), args);
  if (backward) o.plan.sin_sign = -1.0f;
  switch (args.type) {
    case dtype::f32: return launch_instance<float>(o.plan, inst);
    case dtype::f16: return launch_instance<Eigen::half>(o.plan, inst);
    case dtype::bf16: return launch_instance<Eigen::bfloat16>(o.plan, inst);
  }
}

}  // namespace detail

/// Encodes Q (ρ) and K (κ: ρ, or ρ^-T for lifts and scalings) of any rotate_qk instance.
template <class R, layout_kind Q, layout_kind K>
void rotate_qk(const rotate_instance<R, Q, K>& inst, const rotate_qk_args& args) {
  detail::require_view<R>();
  if (const auto spec = kernel_traits<R>::plane_spec(inst)) return rotate_qk(*spec, args);
  detail::run_instance(inst, args, /*backward=*/false);
}

/// Backward: reads dL/d(out) from `in`, writes dL/d(in) to `out` (ρ(c)ᵀ for Q, κ(c)ᵀ for K).
template <class R, layout_kind Q, layout_kind K>
void rotate_qk_backward(const rotate_instance<R, Q, K>& inst, const rotate_qk_args& args) {
  detail::require_view<R>();
  if (const auto spec = kernel_traits<R>::plane_spec(inst)) return rotate_qk_backward(*spec, args);
  detail::require_forward_extras_absent(args);
  detail::run_instance(inst, args, /*backward=*/true);
}

/// A composed encoding (RoPE + ALiBi): its rotation part on Q and K; its bias part is a tile
/// (cpu::bias_tile_of, encode_bias.hpp) added to the logits.
template <class Rotation, class Bias>
void rotate_qk(const composed_instance<Rotation, Bias>& inst, const rotate_qk_args& args) {
  rotate_qk(inst.rotation, args);
}

template <class Rotation, class Bias>
void rotate_qk_backward(const composed_instance<Rotation, Bias>& inst, const rotate_qk_args& args) {
  rotate_qk_backward(inst.rotation, args);
}

}  // namespace grape::cpu
