#pragma once
// The one generic CUDA launcher: a two-phase functor (fill_table, then rotate) per block, with a
// barrier between the phases and the token's table in dynamic shared memory. Host launch code
// stays in the .cu files; the functors are plain structs of scalars and pointers.
#include <cstdint>

namespace grape::cuda {

template <class F>
__global__ void two_phase_kernel(F f) {
  extern __shared__ float table[];
  const std::int64_t token = blockIdx.x;
  f.fill_table(token, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), table);
  __syncthreads();
  f.rotate(token, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), table);
}

}  // namespace grape::cuda
