#pragma once
// The one check of what a kernel is asked to encode, with one wording per field: the channels of
// any encoding (encoding_shape: an instance's or a rotary_spec's), and the rest of a rotary_spec
// (its frequencies and axes). Every entry that takes a spec (the CPU plan and cache, the CUDA
// host, grape gen) calls check_rotary_spec; the instance road calls check_shape.
// Defined in src/header_bodies/spec_check.cpp. Throws grape::input_error naming the field.
#include <type_traits>

#include "grape/math/rotate.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape {

/// Position axes a kernel takes at most (M-RoPE uses 3).
inline constexpr int max_position_axes = 8;

/// The channels an encoding acts on, whatever its representation. `owner` names it in errors
/// ("spec" for a rotary_spec, "encoding" for an instance).
struct encoding_shape {
  const char* owner = "encoding";
  int head_dim = 0;
  int rotary_dim = 0;                 // the representation's dim(): the first rotary_dim channels
  math::layout_kind q_layout = math::layout_kind::half_split;
  math::layout_kind k_layout = math::layout_kind::half_split;
  int num_axes = 1;                   // position axes (the group's rank)
  double attention_factor = 1.0;
};

/// head_dim > 0, 0 < rotary_dim <= head_dim, known layouts (half-split needs an even window),
/// finite attention factor, 1 <= num_axes <= max_position_axes.
void check_shape(const encoding_shape& shape);

/// A spec's shape (owner "spec").
encoding_shape shape_of(const rotary_spec& spec);

/// A rotate_qk instance's shape: its window is the representation's dim().
/// (C++17, like every header the CUDA translation units include.)
template <class Instance>
encoding_shape shape_of(const Instance& inst) {
  return {"encoding", inst.head_dim, inst.rep.dim(), Instance::q_layout, Instance::k_layout,
          static_cast<int>(std::decay_t<decltype(inst.rep)>::rank), inst.attention_factor};
}

/// check_shape, an even rotary_dim, rotary_dim / 2 finite frequencies, plane axes in range.
void check_rotary_spec(const rotary_spec& spec);

}  // namespace grape
