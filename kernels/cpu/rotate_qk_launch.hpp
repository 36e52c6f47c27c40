#pragma once
// Dispatch of a rotate plan to the compile-time (rotary dim, layout) instantiations.
#include "cpu/launch.hpp"
#include "cpu/rotate_qk_item.hpp"

namespace grape::cpu::detail {

template <class Storage, int RotaryDim>
void run_rotate_dim(const rotate_plan& p) {
  if (p.layout == math::layout_kind::half_split)
    launch_items(p.total_tokens, p.rotary_dim, p.threads,
                 rotate_token<Storage, RotaryDim, math::layout_kind::half_split>{p});
  else
    launch_items(p.total_tokens, p.rotary_dim, p.threads,
                 rotate_token<Storage, RotaryDim, math::layout_kind::interleaved>{p});
}

/// Specialised rotary dims (64, 128, 256) and a run-time fallback.
template <class Storage>
void run_rotate(const rotate_plan& p) {
  switch (p.rotary_dim) {
    case 64: return run_rotate_dim<Storage, 64>(p);
    case 128: return run_rotate_dim<Storage, 128>(p);
    case 256: return run_rotate_dim<Storage, 256>(p);
    default: return run_rotate_dim<Storage, 0>(p);
  }
}

}  // namespace grape::cpu::detail
