#pragma once
// The per-token body of rotate_qk for any representation (the rotation-plane encodings have their
// specialised bodies, rotate_qk_item.hpp): locate the token and its coordinates on every axis
// (the plan's addressing, shared with the plane kernels and CUDA), then for every head of Q and K
// widen to float32 scratch, [RMSNorm], gather the rotary window into the representation's order
// (math::window_channel), apply the view's element function, scatter it back times the attention
// factor, narrow once to the output and/or the KV-cache slot; V heads go to the slot unchanged.
//
// Backward (plan.sin_sign < 0) runs the same body at the negated coordinates with the query and
// key actions swapped: ρ(c)ᵀ = κ(−c) and κ(c)ᵀ = ρ(−c) for any representation of Z^N (κ = ρ for
// orthogonal families, ρ^-T for lifts and scalings), so the gradient needs no code of its own.
#include <cstdint>

#include "cpu/fused_head_io.hpp"
#include "common/rotate_addressing.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "cpu/storage_io.hpp"
#include "grape/math/rotate.hpp"
#include "grape/view/concepts.hpp"

namespace grape::cpu::detail {

/// Half-split pairs channel i with i + rd/2 (math::window_channel): into the view's order, where
/// plane i is coordinates (2i, 2i + 1), and back times the attention factor. Written as two
/// streams so that they vectorize (interleaving shuffles), rd even (the plan checks it).
inline void gather_half_split(const float* __restrict head, float* __restrict in, int rd) {
  const int half = rd / 2;
#pragma omp simd
  for (int i = 0; i < half; ++i) {
    in[2 * i] = head[i];
    in[2 * i + 1] = head[half + i];
  }
}

inline void scatter_half_split(const float* __restrict out, float* __restrict head, int rd, float af) {
  const int half = rd / 2;
#pragma omp simd
  for (int i = 0; i < half; ++i) {
    head[i] = af * out[2 * i];
    head[half + i] = af * out[2 * i + 1];
  }
}

template <class Storage, RepresentationView View, math::layout_kind QLayout, math::layout_kind KLayout>
struct encode_token {
  rotate_plan p;
  View view;

  /// Per-thread scratch: the token's state, one head, the window in and out, the view's own.
  static int scratch_floats(const rotate_plan& plan, const View& v) {
    return v.state_floats() + plan.head_dim + 2 * v.dim() + v.scratch_floats();
  }

  void operator()(std::int64_t token, float* scratch) const {
    const token_place place = locate_token(p, token);
    const bool backward = p.sin_sign < 0.0f;
    std::int64_t c[View::rank];
    for (int a = 0; a < View::rank; ++a) {
      const std::int64_t m = position_of(p, token, place, a);
      c[a] = backward ? -m : m;
    }
    const fused_plan& f = p.fused;
    const std::int64_t slot = f.write_cache ? f.slots[token] : -1;
    encode_heads<QLayout>(p.q, token, place, c, /*key=*/backward, f.q_norm, nullptr, 0, scratch);
    Storage* const k_row = slot >= 0 ? cache_head<Storage>(p, f.k_cache, slot, 0) : nullptr;
    encode_heads<KLayout>(p.k, token, place, c, /*key=*/!backward, f.k_norm, k_row,
                          f.k_cache.head_stride, scratch);
    copy_values<Storage>(p, token, place, slot);
  }

  /// Every head of one operand at one token, to its out (if any) and its cache row (if any).
  /// The view's state is prepared once here, for all the operand's heads.
  template <math::layout_kind Layout>
  void encode_heads(const qk_operand& t, std::int64_t token, token_place place, const std::int64_t* c,
                    bool key, const float* norm, Storage* cache_row, std::int64_t cache_stride,
                    float* scratch) const {
    if (t.heads == 0) return;
    const std::int64_t base = token_offset(t, p, token, place);
    const auto* x = static_cast<const Storage*>(t.in) + base;
    auto* y = t.out != nullptr ? static_cast<Storage*>(t.out) + base : nullptr;
    const int d = p.head_dim, rd = p.rotary_dim;
    float* state = scratch;
    float* head = state + view.state_floats();
    float* in = head + d;
    float* out = in + rd;
    float* own = out + rd;
    view.prepare(c, key, state);
    // Interleaved pairing is the identity: the window is read where it lies.
    constexpr bool gather = Layout == math::layout_kind::half_split;
    for (std::int64_t h = 0; h < t.heads; ++h) {
      widen_n(x + h * t.head_stride, head, d);
      if (norm != nullptr) rms_norm_in_place(head, d, norm, p.fused.norm_eps);
      if constexpr (gather) gather_half_split(head, in, rd);
      view.apply(state, key, gather ? in : head, out, own);
      if constexpr (gather) {
        scatter_half_split(out, head, rd, p.attention_factor);
      } else {
        const float af = p.attention_factor;
#pragma omp simd
        for (int j = 0; j < rd; ++j) head[j] = af * out[j];
      }
      if (y != nullptr) narrow_n(head, y + h * t.head_stride, d);
      if (cache_row != nullptr) narrow_n(head, cache_row + h * cache_stride, d);
    }
  }
};

}  // namespace grape::cpu::detail
