#pragma once
// The device-safe view of quaternion_turns (docs/tutorial.md, part 2): what the kernels take. It
// holds pointers into the representation's arrays and scalars only (trivially copyable), and its
// functions are GRAPE_HOST_DEVICE, so the CPU kernels and a CUDA thread run the same code.
#include <cstdint>

#include "grape/config.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/sincos.hpp"

/// y = (cos φ + sin φ·u) ⊗ x for one 4-channel block read as a quaternion x0 + x1·i + x2·j + x3·k:
/// a rotation by φ in two planes at once, about the unit axis u. The element function of both
/// precisions (the representation's float64 apply and the view's float32 one).
template <class T>
GRAPE_HOST_DEVICE inline void turn_block(T c, T s, const T* u, const T* x, T* y) {
  const T p1 = s * u[0], p2 = s * u[1], p3 = s * u[2];
  y[0] = c * x[0] - p1 * x[1] - p2 * x[2] - p3 * x[3];
  y[1] = c * x[1] + p1 * x[0] + p2 * x[3] - p3 * x[2];
  y[2] = c * x[2] - p1 * x[3] + p2 * x[0] + p3 * x[1];
  y[3] = c * x[3] + p1 * x[2] - p2 * x[1] + p3 * x[0];
}

struct quaternion_view {
  static constexpr int rank = 1;
  const grape::math::phase_t* turns = nullptr;  // [blocks] exact turn fraction per position
  const float* axes = nullptr;                  // [blocks][3] unit axis of each block
  int blocks = 0;

  GRAPE_HOST_DEVICE int dim() const { return 4 * blocks; }
  GRAPE_HOST_DEVICE int state_floats() const { return 2 * blocks; }  // cos, sin per block
  GRAPE_HOST_DEVICE int scratch_floats() const { return 0; }

  /// Once per token: cos and sin of every block's exact phase. Orthogonal, so keys turn like queries.
  GRAPE_HOST_DEVICE void prepare(const std::int64_t* c, bool, float* state) const {
    for (int b = 0; b < blocks; ++b) {
      const grape::math::sin_cos sc = grape::math::sincos_of_phase(grape::math::phase_at(c[0], turns[b]));
      state[2 * b] = sc.cos;
      state[2 * b + 1] = sc.sin;
    }
  }
  /// Once per head.
  GRAPE_HOST_DEVICE void apply(const float* state, bool, const float* x, float* y, float*) const {
    for (int b = 0; b < blocks; ++b)
      turn_block(state[2 * b], state[2 * b + 1], axes + 3 * b, x + 4 * b, y + 4 * b);
  }
  /// Every array the view points into, so that cuda::device_view can copy them and repoint it.
  template <class Move>
  void relocate(Move&& move) {
    move(turns, blocks);
    move(axes, 3 * blocks);
  }
};
