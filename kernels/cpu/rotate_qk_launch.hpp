#pragma once
// Dispatch of a rotate plan to the compile-time (rotary dim, layout) instantiations, plain or
// fused (QK-norm, KV-cache write).
#include "cpu/launch.hpp"
#include "cpu/rotate_qk_fused_item.hpp"
#include "cpu/rotate_qk_item.hpp"

namespace grape::cpu::detail {

template <class Storage, int RotaryDim, math::layout_kind Layout>
void run_rotate_fused(const rotate_plan& p) {
  using item = rotate_token_fused<Storage, RotaryDim, Layout>;
  launch_items(p.total_tokens, item::scratch_floats(p), p.threads, item{p});
}

template <class Storage, int RotaryDim>
void run_rotate_dim(const rotate_plan& p) {
  if (p.fused.active()) {
    if (p.layout == math::layout_kind::half_split)
      run_rotate_fused<Storage, RotaryDim, math::layout_kind::half_split>(p);
    else
      run_rotate_fused<Storage, RotaryDim, math::layout_kind::interleaved>(p);
    return;
  }
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
