// rotate_qk kernels for float storage (one translation unit per dtype keeps nvcc time down).
#include "cuda/rotate_qk_launch.cuh"

namespace grape::cuda::detail {
void launch_f32(const rotate_call& r) { launch_typed<float>(r); }
}  // namespace grape::cuda::detail
