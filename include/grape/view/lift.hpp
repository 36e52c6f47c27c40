#pragma once
// The view of unipotent_lift (GRAPE-A): queries y = x + t·u·(vᵀx), keys the paired inverse
// transpose y = x − t·v·(uᵀx). The state of a token is the coefficients t·u_i (or −t·v_i), each
// formed in double and rounded once.
#include <cstdint>

#include "grape/config.hpp"
#include "grape/math/dot.hpp"

namespace grape {

struct lift_view {
  static constexpr int rank = 1;
  const double* u = nullptr;  // [dim]
  const double* v = nullptr;  // [dim]
  int size = 0;

  GRAPE_HOST_DEVICE int dim() const { return size; }
  GRAPE_HOST_DEVICE int state_floats() const { return size; }
  GRAPE_HOST_DEVICE int scratch_floats() const { return 0; }

  GRAPE_HOST_DEVICE void prepare(const std::int64_t* c, bool key, float* coef) const {
    const double t = key ? -static_cast<double>(c[0]) : static_cast<double>(c[0]);
    const double* p = key ? v : u;
    for (int i = 0; i < size; ++i) coef[i] = static_cast<float>(t * p[i]);
  }
  GRAPE_HOST_DEVICE void apply(const float* coef, bool key, const float* x, float* y, float*) const {
    const double* r = key ? u : v;
    const float dot = math::dot_lanes(r, x, size);
    for (int i = 0; i < size; ++i) y[i] = x[i] + coef[i] * dot;
  }
  /// Every array the view points into, for copying it to other memory (cuda::device_view).
  template <class Move>
  void relocate(Move&& move) {
    move(u, size);
    move(v, size);
  }
};

}  // namespace grape
