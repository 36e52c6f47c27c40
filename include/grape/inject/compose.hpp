#pragma once
// compose<Rotate, Bias>: both injections in one encoding (RoPE + ALiBi): q and k are rotated and
// a score bias is added. The representation is the rotation's.
#include <array>
#include <cstdint>

#include "grape/inject/concepts.hpp"

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

template <class Rotate, class Bias>
struct compose {
  static_assert(Rotate::kind == injection_kind::rotate_qk && Bias::kind == injection_kind::score_bias,
                "grape: compose<A, B> takes a rotate_qk injection first and a score_bias second");
  static constexpr injection_kind kind = injection_kind::composed;
  template <class R>
  using instance = composed_instance<typename Rotate::template instance<R>,
                                     typename Bias::template instance<R>>;
};

}  // namespace grape
