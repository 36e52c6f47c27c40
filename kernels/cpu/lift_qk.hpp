#pragma once
// lift_qk for a lift instance (GRAPE-A, lift_qk injection): Q and K of d channels become lifted
// Q and K of d + 2 channels,
//
//   q̃_h = ρ_h(m)·[q_h; 1; 0],   k̃_h = κ_h(n)·[k_{h/group}; 0; 1],   κ_h = ρ_h^-T,
//
// so that any attention kernel's q̃ᵀk̃ is the encoding's score (for GRAPE-A: qᵀk + slope_h·(n − m),
// ALiBi on the causal side). Everything about tokens and positions is rotate_qk's — the same
// rotate_qk_args (layouts by strides, padded or packed varlen, position ids int32/int64 or
// offsets, f32/f16/bf16) and the same checks — plus the lifted tensors, which have their own
// strides. A lifted key depends on its query head's lift, so K is lifted once per query head
// (the lifted K has q.heads heads, like repeat_kv; V is unchanged). The cos/sin cache, QK-norm
// and KV-cache write are rotate_qk's alone (errors here).
//
//   cpu::lift_qk(grape_a::make(params), args, q_lifted, k_lifted);
//   cpu::lift_qk_backward(inst, grad_args, grad_q_lifted, grad_k_lifted);   // dL/dQ, dL/dK
#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "cpu/launch.hpp"
#include "cpu/lift_qk_item.hpp"
#include "common/lift_plan.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "grape/inject/lift_qk.hpp"
#include "grape/view/concepts.hpp"

namespace grape::cpu {

namespace detail {

template <class R>
void run_lift(const lift_instance<R>& inst, const rotate_qk_args& args, const lifted_tensor& q,
              const lifted_tensor& k, bool backward) {
  static_assert(KernelRepresentation<R>,
                "grape: this lift has no device-safe view: give its representation `view() const` "
                "returning a RepresentationView (grape/view/concepts.hpp) to run it in the kernels");
  using View = decltype(std::declval<const R&>().view());
  std::vector<View> views;
  views.reserve(inst.reps.size());
  lift_shape shape{inst.head_dim, inst.head_dim + 2, static_cast<std::int64_t>(inst.reps.size()), View::rank};
  for (const R& rep : inst.reps) {
    views.push_back(rep.view());
    if (views.back().dim() != inst.head_dim + 2) shape.view_dim = views.back().dim();
    for (int axis = 0; axis < View::rank; ++axis)
      shape.generator_scale = std::max(shape.generator_scale, rep.generator(axis).cwiseAbs().maxCoeff());
  }
  const lift_plan lp = make_lift_plan(shape, args, q, k, backward);
  if (lp.plan.total_tokens == 0) return;
  const auto launch = [&](auto storage) {
    using Storage = decltype(storage);
    const lift_token<Storage, View> item{lp, views.data()};
    launch_items(lp.plan.total_tokens, item.scratch_floats(lp, views.front()), lp.plan.threads, item);
  };
  switch (args.type) {
    case dtype::f32: return launch(float{});
    case dtype::f16: return launch(Eigen::half{});
    case dtype::bf16: return launch(Eigen::bfloat16{});
  }
}

}  // namespace detail

/// Lifts Q (args.q.in) and K (args.k.in) into q_lifted and k_lifted; args.q.out and args.k.out
/// must be null.
template <class R>
void lift_qk(const lift_instance<R>& inst, const rotate_qk_args& args, const lifted_tensor& q_lifted,
             const lifted_tensor& k_lifted) {
  detail::run_lift(inst, args, q_lifted, k_lifted, /*backward=*/false);
}

/// Backward: reads dL/d q̃ and dL/d k̃ from the lifted tensors and writes dL/dQ to args.q.out and
/// dL/dK (summed over each key head's query heads) to args.k.out; args.q.in and args.k.in must be
/// null. The forward's positions and shapes, otherwise.
template <class R>
void lift_qk_backward(const lift_instance<R>& inst, const rotate_qk_args& args, const lifted_tensor& grad_q_lifted,
                      const lifted_tensor& grad_k_lifted) {
  detail::run_lift(inst, args, grad_q_lifted, grad_k_lifted, /*backward=*/true);
}

}  // namespace grape::cpu
