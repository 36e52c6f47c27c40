#pragma once
// score_bias<B>: the logit of query position m and key position n is qᵀk + b_h(m, n).
// B provides heads() and bias(head, c_m, c_n); a content-dependent bias (FoX) also provides
// bias_with_content(head, m, n, origin): the same bias with its per-position content moved so
// that the content at position origin + ℓ is the content that sat at ℓ.
#include <array>
#include <cstdint>

#include "grape/inject/concepts.hpp"

namespace grape {

template <class B>
concept ContentDependentBias = requires(const B& b, std::int64_t p) {
  { b.bias_with_content(0, p, p, p) } -> std::convertible_to<double>;
};

template <class B>
struct bias_instance {
  B bias;
  int head_dim = 0;

  int content_dim() const { return head_dim; }
  int heads() const { return bias.heads(); }

  template <std::size_t N>
  double score(int h, const double* q, const double* k, const std::array<std::int64_t, N>& m,
               const std::array<std::int64_t, N>& n) const {
    return detail::dot(q, k, head_dim) + bias.bias(h, m, n);
  }
};

template <class B>
struct score_bias {
  static constexpr std::string_view description = "add a score bias";
  template <class R>
  using instance = bias_instance<B>;
  using bias_type = B;
};

}  // namespace grape
