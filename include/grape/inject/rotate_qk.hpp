#pragma once
// rotate_qk<QLayout, KLayout>: q and k of one head are turned by the representation. The first
// rep.dim() channels (the rotary window) are paired into planes by the layout; the rest pass
// through; the attention factor multiplies the rotated channels (reference semantics: it scales
// cos and sin). KLayout exists so that a Q/K layout mismatch can be written down and caught.
#include <array>
#include <cstdint>
#include <vector>

#include "grape/inject/concepts.hpp"
#include "grape/math/rotate.hpp"
#include "grape/rep/concepts.hpp"

namespace grape {

using math::layout_kind;

template <class R, layout_kind QLayout, layout_kind KLayout>
struct rotate_instance {
  static constexpr layout_kind q_layout = QLayout, k_layout = KLayout;
  R rep;
  int head_dim = 0;
  double attention_factor = 1.0;

  int content_dim() const { return head_dim; }
  int heads() const { return 1; }
  int rotary_dim() const { return rep.dim(); }
  const R& representation(int) const { return rep; }

  /// One head's q (is_key = false) or k turned for coordinates c. T: double or float.
  template <class T>
  void encode(bool is_key, const std::array<std::int64_t, R::rank>& c, const T* x, T* y) const {
    const int d = rotary_dim();
    const layout_kind layout = is_key ? KLayout : QLayout;
    std::vector<T> in(d), out(d);
    for (int j = 0; j < d; ++j) in[j] = x[channel_of(layout, j, d)];
    if (is_key) rep.apply_key(c, in.data(), out.data());
    else rep.apply(c, in.data(), out.data());
    const T af = static_cast<T>(attention_factor);
    for (int j = 0; j < d; ++j) y[channel_of(layout, j, d)] = af * out[j];
    for (int j = d; j < head_dim; ++j) y[j] = x[j];
  }

  /// The channel that holds coordinate j of the representation's vector (math::window_channel).
  static int channel_of(layout_kind layout, int j, int d) { return math::window_channel(layout, j, d); }

  double score(int, const double* q, const double* k, const std::array<std::int64_t, R::rank>& m,
               const std::array<std::int64_t, R::rank>& n) const {
    std::vector<double> qe(head_dim), ke(head_dim);
    encode(false, m, q, qe.data());
    encode(true, n, k, ke.data());
    return detail::dot(qe.data(), ke.data(), head_dim);
  }
};

template <layout_kind QLayout, layout_kind KLayout = QLayout>
struct rotate_qk {
  static constexpr std::string_view description = "rotate Q and K";
  template <class R>
  using instance = rotate_instance<R, QLayout, KLayout>;
};

}  // namespace grape
