#pragma once
// The view of rotation_planes<N>: plane i turns by the exact phase Σ_k c_k·turn[i][k]. The state
// of a token is its table: cos of every plane, then sin.
#include <cstdint>

#include "grape/config.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

namespace grape {

/// Turns coordinates (2i, 2i+1) by the angle whose cos and sin are table[i], table[planes + i].
GRAPE_HOST_DEVICE inline void rotate_planes(const float* __restrict table, int planes,
                                            const float* __restrict x, float* __restrict y) {
  const float* __restrict cs = table;
  const float* __restrict sn = table + planes;
  for (int i = 0; i < planes; ++i) {
    const math::pair2<float> r = math::rotate_pair(x[2 * i], x[2 * i + 1], sn[i], cs[i]);
    y[2 * i] = r.first;
    y[2 * i + 1] = r.second;
  }
}

template <int N>
struct planes_view {
  static constexpr int rank = N;
  const math::phase_t* turns = nullptr;  // [planes][N] turn fractions per unit of each axis
  int planes = 0;

  GRAPE_HOST_DEVICE int dim() const { return 2 * planes; }
  GRAPE_HOST_DEVICE int state_floats() const { return 2 * planes; }
  GRAPE_HOST_DEVICE int scratch_floats() const { return 0; }

  GRAPE_HOST_DEVICE math::phase_t phase(int plane, const std::int64_t* c) const {
    math::phase_t p = 0;
    for (int k = 0; k < N; ++k) p += math::phase_at(c[k], turns[plane * N + k]);
    return p;
  }

  /// Orthogonal: keys turn like queries.
  GRAPE_HOST_DEVICE void prepare(const std::int64_t* c, bool, float* table) const {
    for (int i = 0; i < planes; ++i) {
      const math::sin_cos sc = math::sincos_of_phase(phase(i, c));
      table[i] = sc.cos;
      table[planes + i] = sc.sin;
    }
  }
  GRAPE_HOST_DEVICE void apply(const float* table, bool, const float* x, float* y, float*) const {
    rotate_planes(table, planes, x, y);
  }
  /// Every array the view points into, for copying it to other memory (cuda::device_view).
  template <class Move>
  void relocate(Move&& move) {
    move(turns, planes * N);
  }
};

}  // namespace grape
