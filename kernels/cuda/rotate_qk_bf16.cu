// rotate_qk kernels for __nv_bfloat16 storage (one translation unit per dtype keeps nvcc time down).
#include "cuda/rotate_qk_launch.cuh"

namespace grape::cuda::detail {
void launch_bf16(const rotate_call& r) { launch_typed<__nv_bfloat16>(r); }
}  // namespace grape::cuda::detail
