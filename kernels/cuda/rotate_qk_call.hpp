#pragma once
// What one rotation launch runs, as the host side hands it to a per-dtype launch function: the
// checked plan with device pointers, the launch's sizes and its stream.
// Plain C++ (no device code), so the host side compiles with g++.
#include <cstdint>

#include "common/rotate_plan.hpp"
#include "cuda/rotate_qk_cuda.hpp"

namespace grape::cuda::detail {

struct rotate_call {
  kernel::rotate_plan plan;
  std::int64_t total_tokens = 0;
  std::int64_t max_position = 0;
  std::int64_t cache_rows = 0;  // rows of plan.cache (device), 0 without a cache
  int* error_flag = nullptr;
  bool vectorized = false;  // 16-byte chunks are legal (alignment and divisibility checked)
  cudaStream_t stream = nullptr;
};

/// What every CUDA entry refuses before planning: args.cache (device caches live in
/// device_rotary), the CPU-only fused extras, a null error flag.
void check_device_call(const kernel::rotate_qk_args& args, const int* device_error_flag);

/// Whether the call may move 16-byte chunks: the rotated and copied widths divide into chunks and
/// every pointer and stride of Q and K is 16-byte aligned (else one element per chunk).
inline bool chunks_fit(const rotary_spec& spec, const kernel::rotate_qk_args& args) {
  const int width = 16 / (args.type == kernel::dtype::f32 ? 4 : 2);
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  bool fit = (spec.layout == layout_kind::half_split ? (spec.rotary_dim / 2) % width == 0
                                                     : spec.rotary_dim % (2 * width) == 0) &&
             (spec.head_dim - spec.rotary_dim) % width == 0;
  for (const auto* t : {&args.q, &args.k})
    if (t->heads > 0)
      fit = fit && aligned(t->in) && aligned(t->out) && t->token_stride % width == 0 && t->head_stride % width == 0 &&
            t->batch_stride % width == 0;
  return fit;
}

void launch_f32(const rotate_call& r);
void launch_f16(const rotate_call& r);
void launch_bf16(const rotate_call& r);

}  // namespace grape::cuda::detail
