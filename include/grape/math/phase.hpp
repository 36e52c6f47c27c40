#pragma once
// Exact rotation phases. A frequency θ (radians per position) is held as a 64-bit fixed-point
// fraction of a turn, f = round(θ / 2π · 2^64). The phase of position m is then m·f mod 2^64: one
// integer multiply, exact for every int64 position, so the angle error does not grow with m.
// The only rounding left is in f itself (< 2^-64 turn per position; docs/precision.md).
#include <cstdint>

#include "grape/config.hpp"

namespace grape::math {

using phase_t = std::uint64_t;  // an angle as a fraction of a turn, scaled by 2^64

/// Phase of an integer position for a frequency held as a turn fraction (wraps modulo one turn).
GRAPE_HOST_DEVICE constexpr phase_t phase_at(std::int64_t position, phase_t turn_fraction) {
  return static_cast<phase_t>(position) * turn_fraction;
}

/// The phase of a real angle given in turns (contextual GRAPE-M: Φ·θ/2π formed in float64): its
/// whole turns dropped exactly, the fraction kept to 2^-63 turn. |turns| >= 2^52 is a whole number
/// of turns in float64 (phase 0); so is a NaN, which callers refuse before.
GRAPE_HOST_DEVICE inline phase_t phase_of_turns(double turns) {
  constexpr double whole_from = 4503599627370496.0;  // 2^52
  if (!(turns < whole_from && turns > -whole_from)) return 0;
  double fraction = turns - static_cast<double>(static_cast<std::int64_t>(turns));  // exact, in (−1, 1)
  if (fraction < 0) fraction += 1.0;                                                 // [0, 1]
  return static_cast<phase_t>(fraction * 9223372036854775808.0) << 1;                // 1.0 wraps to 0
}

/// The phase as radians in [-π, π), in double (for references and host-side tables).
GRAPE_HOST_DEVICE inline double phase_to_radians(phase_t phase) {
  constexpr double radians_per_unit = 6.283185307179586476925286766559 / 18446744073709551616.0;
  return static_cast<double>(static_cast<std::int64_t>(phase)) * radians_per_unit;
}

}  // namespace grape::math

namespace grape::math {

/// Host only: a frequency in radians per position as a turn fraction, rounded to nearest. The
/// division by 2π runs in quad precision where the compiler has it (GCC/Clang on x86-64: 113-bit
/// significand, 2π to 106 bits), else in long double; either way the fraction is within one unit
/// of 2^-64 turn of the exact value for frequencies below 2^10 rad/position.
inline phase_t turn_fraction_of(double radians_per_position) {
#if defined(__SIZEOF_FLOAT128__) && !defined(__CUDACC__)
  using wide = __float128;
  const wide two_pi = static_cast<wide>(6.283185307179586) + static_cast<wide>(2.4492935982947064e-16);
#else
  using wide = long double;
  const wide two_pi = 6.283185307179586476925286766559L;
#endif
  wide turns = static_cast<wide>(radians_per_position) / two_pi;
  turns -= static_cast<wide>(static_cast<std::int64_t>(turns));  // keep the fraction
  if (turns < 0) turns += 1;
  const wide two_64 = static_cast<wide>(18446744073709551616.0L);
  const wide rounded = turns * two_64 + static_cast<wide>(0.5);
  // Values at or past 2^64 (turns rounded up to 1) wrap to 0, the same angle.
  return rounded >= two_64 ? phase_t{0} : static_cast<phase_t>(rounded);
}

}  // namespace grape::math
