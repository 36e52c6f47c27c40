#pragma once
// compose<Rotate, Bias>: both injections in one encoding (RoPE + ALiBi): q and k are rotated and
// a score bias is added. The representation is the rotation's.
#include <array>
#include <cstdint>

#include "grape/inject/concepts.hpp"
#include "grape/inject/rotate_qk.hpp"

namespace grape {

template <class RotateInstance, class BiasInstance>
struct composed_instance {
  RotateInstance rotation;
  BiasInstance bias;

  int content_dim() const { return rotation.content_dim(); }
  int heads() const { return bias.heads(); }
  const auto& representation(int h) const { return rotation.representation(h); }

  template <std::size_t N>
  double score(int h, const double* q, const double* k, const std::array<std::int64_t, N>& m,
               const std::array<std::int64_t, N>& n) const {
    return rotation.score(0, q, k, m, n) + bias.bias.bias(h, m, n);
  }
};

/// The rotation part of an instance that rotates Q and K: itself, or a composed instance's.
template <class I>
const I& rotation_part(const I& inst) {
  return inst;
}
template <class RotateInstance, class BiasInstance>
const RotateInstance& rotation_part(const composed_instance<RotateInstance, BiasInstance>& inst) {
  return inst.rotation;
}

template <class I>
inline constexpr bool is_rotate_qk = false;
template <layout_kind Q, layout_kind K>
inline constexpr bool is_rotate_qk<rotate_qk<Q, K>> = true;

template <class Rotate, class Bias>
struct compose {
  static_assert(is_rotate_qk<Rotate> && requires { typename Bias::bias_type; },
                "grape: compose<A, B> takes a rotate_qk injection first and a score_bias second");
  static constexpr std::string_view description = "rotate Q and K, then add a score bias";
  template <class R>
  using instance = composed_instance<typename Rotate::template instance<R>,
                                     typename Bias::template instance<R>>;
};

}  // namespace grape
