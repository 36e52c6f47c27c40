#pragma once
// The run-time parameters of a rotary encoding: everything a rotate_qk kernel needs and nothing
// about where the numbers came from (a built-in default, a schedule, a model's config.json).
#include <cmath>
#include <cstdint>
#include <vector>

#include "grape/math/rotate.hpp"

namespace grape {

using math::layout_kind;

struct rotary_spec {
  int head_dim = 0;                          // channels per head
  int rotary_dim = 0;                        // rotated channels, even, <= head_dim; rest pass through
  layout_kind layout = layout_kind::half_split;
  std::vector<double> inv_freq;              // θ_i in radians per position, rotary_dim / 2 values
  double attention_factor = 1.0;             // multiplies cos and sin (reference semantics)
  // Multi-axis positions (M-RoPE sections, axial 2-D): plane i turns with position axis
  // plane_axis[i]. Empty means every plane follows axis 0 (token positions).
  int num_axes = 1;
  std::vector<int> plane_axis;
};

/// The RoPE frequency table θ_i = 1 / base^(2i/d), i = 0 .. d/2 - 1, in float64, written as the
/// reference implementations write it (1.0 / base ** (arange(0, d, 2) / d)): the built-ins'
/// default, the sinusoidal embedding's frequencies and the model schedules' base table
/// (src/model/rope_schedule.cpp), so a built-in type and a config give the same bits.
inline std::vector<double> rope_inv_freq(int rotary_dim, double base) {
  std::vector<double> f(rotary_dim / 2);
  for (int i = 0; i < rotary_dim / 2; ++i) f[i] = 1.0 / std::pow(base, (2.0 * i) / rotary_dim);
  return f;
}

}  // namespace grape
