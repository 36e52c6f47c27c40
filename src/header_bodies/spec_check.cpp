// The one check of an encoding's shape and of a rotary_spec (grape/schedule/spec_check.hpp).
#include "grape/schedule/spec_check.hpp"

#include <cmath>
#include <string>

#include "grape/detail/error.hpp"

namespace grape {
namespace {

[[noreturn]] void fail(const std::string& what) { throw input_error(what); }

}  // namespace

void check_shape(const encoding_shape& s) {
  const std::string o = s.owner;
  if (s.head_dim <= 0) fail(o + ".head_dim must be positive");
  if (s.rotary_dim <= 0) fail(o + ".rotary_dim must be positive");
  if (s.rotary_dim > s.head_dim) fail(o + ".rotary_dim exceeds " + o + ".head_dim");
  for (math::layout_kind l : {s.q_layout, s.k_layout}) {
    if (l != math::layout_kind::half_split && l != math::layout_kind::interleaved)
      fail(o + ".layout is not a known layout");
    if (l == math::layout_kind::half_split && s.rotary_dim % 2 != 0)
      fail(o + ".rotary_dim must be even (half-split pairs channel i with i + rotary_dim/2)");
  }
  if (!std::isfinite(s.attention_factor)) fail(o + ".attention_factor is not finite");
  if (s.num_axes < 1 || s.num_axes > max_position_axes)
    fail(o + ".num_axes must be in [1, " + std::to_string(max_position_axes) + "]");
}

encoding_shape shape_of(const rotary_spec& spec) {
  return {"spec", spec.head_dim, spec.rotary_dim, spec.layout, spec.layout, spec.num_axes,
          spec.attention_factor};
}

void check_rotary_spec(const rotary_spec& spec) {
  check_shape(shape_of(spec));
  if (spec.rotary_dim % 2 != 0) fail("spec.rotary_dim must be even");
  const int half = spec.rotary_dim / 2;
  if (static_cast<int>(spec.inv_freq.size()) != half)
    fail("spec.inv_freq must hold rotary_dim / 2 = " + std::to_string(half) + " values");
  for (int i = 0; i < half; ++i)
    if (!std::isfinite(spec.inv_freq[i])) fail("spec.inv_freq[" + std::to_string(i) + "] is not finite");
  if (!spec.plane_axis.empty()) {
    if (static_cast<int>(spec.plane_axis.size()) != half)
      fail("spec.plane_axis must be empty or hold rotary_dim / 2 values");
    for (int i = 0; i < half; ++i)
      if (spec.plane_axis[i] < 0 || spec.plane_axis[i] >= spec.num_axes)
        fail("spec.plane_axis[" + std::to_string(i) + "] is outside [0, num_axes)");
  }
}

}  // namespace grape
