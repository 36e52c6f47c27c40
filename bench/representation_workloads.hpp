#pragma once
// Representations other than RoPE's table through the instance road, cpu::rotate_qk(instance,
// args), on the same Q/K buffers as the RoPE cases (32 heads × 128, f32, in place): each against
// the in-place memory pass with the same traffic, to say what each representation's arithmetic
// costs above memory. Positions are the token indices (no position ids; every axis equal).
#include <string>
#include <vector>

#include "cpu/encode_qk.hpp"
#include "grape/encodings/grape_m.hpp"
#include "grape/encodings/rope.hpp"
#include "grape/encodings/string_rope.hpp"
#include "grape/encodings/xpos.hpp"
#include "rope_workloads.hpp"

namespace grape_bench {

/// The representations measured, by case name.
inline const std::vector<std::string>& representation_names() {
  static const std::vector<std::string> names = {"planes_instance", "planes_generic_body", "xpos_scaled_planes",
                                                 "grape_m_rank2", "string_rope_skew"};
  return names;
}

/// Runs one call of representation `name` on args (built once per process).
inline void run_representation(const std::string& name, const grape::cpu::rotate_qk_args& args) {
  static const auto rope = grape::rope::make({head_dim, head_dim, 10000.0, 1.0});
  static const auto xpos = grape::xpos::make({head_dim, 10000.0, 512.0, 0.4});
  static const auto grape_m = [] {
    auto p = grape::grape_m::default_params();
    std::mt19937_64 rng(7);
    p.head_dim = head_dim;
    p.a = grape::detail::normal_vector(rng, head_dim, 0.09);
    p.b = grape::detail::normal_vector(rng, head_dim, 0.09);
    return grape::grape_m::make(p);
  }();
  static const auto string_rope = grape::string_rope::make({head_dim, 10000.0, 1});
  if (name == "planes_instance") grape::cpu::rotate_qk(rope, args);
  else if (name == "planes_generic_body") grape::cpu::detail::run_instance(rope, args, false);
  else if (name == "xpos_scaled_planes") grape::cpu::rotate_qk(xpos, args);
  else if (name == "grape_m_rank2") grape::cpu::rotate_qk(grape_m, args);
  else grape::cpu::rotate_qk(string_rope, args);
}

}  // namespace grape_bench
