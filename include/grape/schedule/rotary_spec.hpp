#pragma once
// The run-time parameters of a rotary encoding: everything a rotate_qk kernel needs and nothing
// about where the numbers came from (a built-in default, a schedule, a model's config.json).
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

}  // namespace grape
