#pragma once
// How a representation reaches the kernels, on the CPU and on CUDA: by default through its view
// (the generic bodies, encode_qk_item.hpp and cuda/encode_qk_thread.hpp); a specialisation may
// hand an instance to a specialised kernel instead. Rotation planes whose planes each follow one
// position axis become a rotary_spec and take the packet kernels (CPU) or the chunked kernel
// (CUDA).
#include <optional>

#include "grape/rep/rotation_planes.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape {

/// By default: no specialised kernel.
template <class R>
struct kernel_traits {
  template <class Instance>
  static std::optional<rotary_spec> plane_spec(const Instance&) {
    return std::nullopt;
  }
};

/// Rotation planes: the specialised kernels, when Q and K share a layout and every plane follows
/// a single axis (a plane with a frequency on two axes, RoPE-Mixed, takes the generic body).
template <int N>
struct kernel_traits<rotation_planes<N>> {
  template <class Instance>
  static std::optional<rotary_spec> plane_spec(const Instance& inst) {
    if constexpr (Instance::q_layout != Instance::k_layout) {
      return std::nullopt;
    } else {
      rotary_spec s;
      s.head_dim = inst.head_dim;
      s.rotary_dim = inst.rep.dim();
      s.layout = Instance::q_layout;
      s.attention_factor = inst.attention_factor;
      s.num_axes = N;
      for (const auto& w : inst.rep.frequencies()) {
        int axis = 0, used = 0;
        for (int k = 0; k < N; ++k)
          if (w[k] != 0.0) axis = k, ++used;
        if (used > 1) return std::nullopt;
        s.inv_freq.push_back(w[axis]);
        if (N > 1) s.plane_axis.push_back(axis);
      }
      return s;
    }
  }
};

}  // namespace grape
