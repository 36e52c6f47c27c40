#pragma once
// A validated lift_qk call (lift_qk.hpp): the d-channel Q and K through rotate_qk's own plan
// (tokens, positions, strides, dtype) plus the lifted (d + 2)-channel operands. Built and checked
// on the host; the per-token bodies (CPU and CUDA) trust it.
#include <cstdint>

#include "common/qk_args.hpp"
#include "common/rotate_plan.hpp"

namespace grape::kernel {

/// A lifted Q or K: q_heads heads of head_dim + 2 channels. Addressing as qk_tensor, with its own
/// strides (elements); channels contiguous.
struct lifted_tensor {
  void* data = nullptr;
  std::int64_t size = 0;  // elements addressable from data: the bounds check
  std::int64_t batch_stride = 0;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
};

struct lift_plan {
  rotate_plan plan;               // Q and K with d channels: tokens, positions, strides
  qk_operand q_lifted, k_lifted;  // d + 2 channels, plan.q.heads heads each (in == out)
  bool backward = false;
};

/// What the lift's instance says about itself.
struct lift_shape {
  int head_dim = 0;
  int view_dim = 0;            // every head's representation must act on head_dim + 2 channels
  std::int64_t heads = 0;      // one lift per query head
  int num_axes = 1;
  double generator_scale = 0;  // largest |entry| of any head's generator: lifted entries reach it × position
};

/// Checks every argument (throws grape::input_error naming it). Forward reads args.q.in and
/// args.k.in and writes the lifted tensors; backward reads the lifted tensors (dL/d lifted) and
/// writes args.q.out and args.k.out.
lift_plan make_lift_plan(const lift_shape& shape, const rotate_qk_args& args, const lifted_tensor& q_lifted,
                         const lifted_tensor& k_lifted, bool backward, const device_indices* device = nullptr);

}  // namespace grape::kernel
