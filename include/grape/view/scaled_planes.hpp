#pragma once
// The view of scaled_planes (xPos): rotation planes, then plane i scaled by e^{t·λ_i} for queries
// and e^{−t·λ_i} for keys. The scale multiplies the token's cos and sin, so a head costs what a
// plane rotation costs. The exponent t·λ_i is formed and exponentiated in double, then rounded to
// float once: the scale is exact to float precision at every position the encoding allows.
#include <math.h>

#include <cstdint>

#include "grape/config.hpp"
#include "grape/view/planes.hpp"

namespace grape {

struct scaled_planes_view {
  static constexpr int rank = 1;
  planes_view<1> planes;
  const double* log_scale = nullptr;  // [planes] λ_i

  GRAPE_HOST_DEVICE int dim() const { return planes.dim(); }
  GRAPE_HOST_DEVICE int state_floats() const { return planes.state_floats(); }
  GRAPE_HOST_DEVICE int scratch_floats() const { return 0; }

  GRAPE_HOST_DEVICE void prepare(const std::int64_t* c, bool key, float* table) const {
    planes.prepare(c, key, table);
    const double t = key ? -static_cast<double>(c[0]) : static_cast<double>(c[0]);
    for (int i = 0; i < planes.planes; ++i) {
      const float f = static_cast<float>(::exp(t * log_scale[i]));
      table[i] *= f;
      table[planes.planes + i] *= f;
    }
  }
  GRAPE_HOST_DEVICE void apply(const float* table, bool, const float* x, float* y, float*) const {
    rotate_planes(table, planes.planes, x, y);
  }
  /// Every array the view points into, for copying it to other memory (cuda::device_view).
  template <class Move>
  void relocate(Move&& move) {
    planes.relocate(move);
    move(log_scale, planes.planes);
  }
};

}  // namespace grape
