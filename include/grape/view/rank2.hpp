#pragma once
// The view of rank2_rotation (GRAPE-M): exp(t·L)x by the O(d) closed form of math/rank2.hpp in
// the orthonormal basis of the turning plane, the half angle t·s/2 as an exact phase. The state
// of a token is sin and cos of its half angle.
#include <cstdint>

#include "grape/config.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rank2.hpp"
#include "grape/math/sincos.hpp"

namespace grape {

struct rank2_view {
  static constexpr int rank = 1;
  const float* e1 = nullptr;  // [dim] orthonormal basis of the turning plane (math::rank2_plane)
  const float* e2 = nullptr;  // [dim]
  math::phase_t half_turn = 0;  // s/2 per position as a turn fraction
  int size = 0;

  GRAPE_HOST_DEVICE int dim() const { return size; }
  GRAPE_HOST_DEVICE int state_floats() const { return 2; }
  GRAPE_HOST_DEVICE int scratch_floats() const { return 0; }

  /// Orthogonal: keys turn like queries.
  GRAPE_HOST_DEVICE void prepare(const std::int64_t* c, bool, float* state) const {
    const math::sin_cos sc = math::sincos_of_phase(math::phase_at(c[0], half_turn));
    state[0] = sc.sin;
    state[1] = sc.cos;
  }
  GRAPE_HOST_DEVICE void apply(const float* state, bool, const float* x, float* y, float*) const {
    math::rank2_apply<float>(e1, e2, state[0], state[1], x, y, size);
  }
  /// Every array the view points into, for copying it to other memory (cuda::device_view).
  template <class Move>
  void relocate(Move&& move) {
    move(e1, size);
    move(e2, size);
  }
};

}  // namespace grape
