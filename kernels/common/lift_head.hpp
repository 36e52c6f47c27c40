#pragma once
// One head of a lift (lift_qk: GRAPE-A) in float32, shared by the CPU item and the CUDA thread.
// Forward: the head's d channels, augmented to [q; 1; 0] (query) or [k; 0; 1] (key), go through
// ρ_h(c) or κ_h(c) = ρ_h(c)^-T. Backward: the d + 2 gradient goes through ρ_h(c)ᵀ = κ_h(−c) (or
// κ_h(c)ᵀ = ρ_h(−c)), and its first d channels are the head's gradient (the augmented constants
// have none). Any representation view of dim() = d + 2 works, not only ALiBi's lift.
#include <cstdint>

#include "grape/config.hpp"

namespace grape::kernel {

/// Floats one head needs besides its input and output: the view's state and its scratch.
template <class View>
GRAPE_HOST_DEVICE int lift_work_floats(const View& v) {
  return v.state_floats() + v.scratch_floats();
}

/// in: d + 2 floats, the head's d channels (forward; the two augmented entries are set here) or
/// the whole lifted gradient (backward). out: d + 2 floats. c: the token's coordinates.
template <class View>
GRAPE_HOST_DEVICE void lift_head(const View& v, const std::int64_t* c, bool key, bool backward, float* in,
                                 float* out, float* work) {
  const int d = v.dim() - 2;
  std::int64_t at[View::rank];
  for (int a = 0; a < View::rank; ++a) at[a] = backward ? -c[a] : c[a];
  if (!backward) {
    in[d] = key ? 0.0f : 1.0f;
    in[d + 1] = key ? 1.0f : 0.0f;
  }
  const bool action = backward ? !key : key;  // ρ(c)ᵀ = κ(−c), κ(c)ᵀ = ρ(−c)
  v.prepare(at, action, work);
  v.apply(work, action, in, out, work + v.state_floats());
}

}  // namespace grape::kernel
