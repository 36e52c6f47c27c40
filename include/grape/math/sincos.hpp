#pragma once
// sin and cos of an exact phase, in float32, without a branch: the phase is split into the nearest
// quarter turn q and a remainder |r| <= 1/8 turn (exact integer arithmetic), the remainder is
// converted to radians (|x| <= π/4) and two short minimax polynomials (the Cephes sinf/cosf
// coefficients, max error about 1 ulp on [-π/4, π/4]) give sin x and cos x; the quadrant swaps and
// negates them. Plain arithmetic and selects, so it vectorizes on the CPU and runs as is on CUDA.
#include <cstdint>

#include "grape/config.hpp"
#include "grape/math/phase.hpp"

namespace grape::math {

struct sin_cos {
  float sin;
  float cos;
};

GRAPE_HOST_DEVICE inline sin_cos sincos_of_phase(phase_t phase) {
  constexpr phase_t quarter = phase_t{1} << 62;
  const phase_t q = (phase + (quarter >> 1)) >> 62;  // nearest quarter turn, 0..3 (wraps)
  const auto r = static_cast<std::int64_t>(phase - (q << 62));  // in [-2^61, 2^61)
  // Top 32 bits of the remainder, to radians: 2π / 2^32 per unit.
  const float x = static_cast<float>(static_cast<std::int32_t>(r >> 32)) * 1.46291807926715968e-9f;
  const float z = x * x;
  const float sx = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * x + x;
  const float cx =
      ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z -
      0.5f * z + 1.0f;
  const bool swap = (q & 1u) != 0;
  const float sign_sin = (q & 2u) ? -1.0f : 1.0f;
  const float sign_cos = ((q + 1u) & 2u) ? -1.0f : 1.0f;
  return {sign_sin * (swap ? cx : sx), sign_cos * (swap ? sx : cx)};
}

}  // namespace grape::math
