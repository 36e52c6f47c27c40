#pragma once
// Rotating one plane (a pair of channels) by a given sin/cos. T is the arithmetic type (float for
// kernels, double for references); storage conversion happens outside.
#include "grape/config.hpp"

namespace grape::math {

template <class T>
struct pair2 {
  T first;
  T second;
};

/// (x0, x1) turned by the angle whose sine and cosine are s and c.
template <class T>
GRAPE_HOST_DEVICE constexpr pair2<T> rotate_pair(T x0, T x1, T s, T c) {
  return {x0 * c - x1 * s, x1 * c + x0 * s};
}

/// Channel pairing of a layout: plane i of a rotary window of `rotary_dim` channels.
enum class layout_kind : int { half_split = 0, interleaved = 1 };

/// The layout's name as configs, reports and generated files spell it.
GRAPE_HOST_DEVICE constexpr const char* layout_name(layout_kind layout) {
  return layout == layout_kind::half_split ? "half_split" : "interleaved";
}

GRAPE_HOST_DEVICE constexpr int first_channel(layout_kind layout, int plane, int rotary_dim) {
  (void)rotary_dim;
  return layout == layout_kind::half_split ? plane : 2 * plane;
}
GRAPE_HOST_DEVICE constexpr int second_channel(layout_kind layout, int plane, int rotary_dim) {
  return layout == layout_kind::half_split ? plane + rotary_dim / 2 : 2 * plane + 1;
}

/// The channel that holds coordinate j of a representation's vector when the rotary window of
/// `rotary_dim` channels is paired by `layout`: coordinates (2i, 2i+1) are plane i. Interleaved is
/// the identity, so representations that are not made of planes (rank-2, dense generators, odd
/// dimensions) use it; half-split needs an even window.
GRAPE_HOST_DEVICE constexpr int window_channel(layout_kind layout, int j, int rotary_dim) {
  return j % 2 == 0 ? first_channel(layout, j / 2, rotary_dim) : second_channel(layout, j / 2, rotary_dim);
}

}  // namespace grape::math
