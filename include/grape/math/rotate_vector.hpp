#pragma once
// Rotate one head vector for one position: the device function a kernel author calls inside a
// fused kernel (attention, KV-cache write). Exact phase per plane, float32 arithmetic, any layout,
// partial rotary (channels past rotary_dim are copied), attention factor on cos and sin.
// T: float, or a storage type with conversions to and from float (__half, __nv_bfloat16 on the
// device) — pass load/store functors for those.
#include <cstdint>

#include "grape/config.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

namespace grape::math {

struct identity_float {
  GRAPE_HOST_DEVICE float operator()(float x) const { return x; }
};

/// y = rotation of x for `position`; y may equal x. turn_fractions: rotary_dim / 2 values.
template <class T, class Load = identity_float, class Store = identity_float>
GRAPE_HOST_DEVICE void rotate_vector(const T* x, T* y, std::int64_t position, const phase_t* turn_fractions,
                                     int rotary_dim, int head_dim, layout_kind layout, float attention_factor = 1.0f,
                                     Load load = {}, Store store = {}) {
  for (int i = 0; i < rotary_dim / 2; ++i) {
    const sin_cos sc = sincos_of_phase(phase_at(position, turn_fractions[i]));
    const int c0 = first_channel(layout, i, rotary_dim), c1 = second_channel(layout, i, rotary_dim);
    const auto r = rotate_pair(load(x[c0]), load(x[c1]), attention_factor * sc.sin, attention_factor * sc.cos);
    y[c0] = store(r.first);
    y[c1] = store(r.second);
  }
  if (x != y)
    for (int c = rotary_dim; c < head_dim; ++c) y[c] = x[c];
}

}  // namespace grape::math
