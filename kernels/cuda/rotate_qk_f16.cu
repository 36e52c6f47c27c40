// rotate_qk kernels for __half storage (one translation unit per dtype keeps nvcc time down).
#include "cuda/rotate_qk_launch.cuh"

namespace grape::cuda::detail {
void launch_f16(const rotate_call& r) { launch_typed<__half>(r); }
}  // namespace grape::cuda::detail
