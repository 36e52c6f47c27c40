#pragma once
// The generic CUDA kernels and their launches, each checked (errors.hpp):
//  - two_phase_kernel: a two-phase functor (fill_table, then rotate) per block, with a barrier
//    between the phases and the block's table in dynamic shared memory;
//  - items_kernel: a functor f(item) over [0, items), grid-stride (grid_stride.hpp).
// The functors are plain structs of scalars and pointers.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/errors.hpp"
#include "cuda/grid_stride.hpp"

namespace grape::cuda {

template <class F>
__global__ void two_phase_kernel(F f) {
  extern __shared__ float table[];
  const std::int64_t token = blockIdx.x;
  f.fill_table(token, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), table);
  __syncthreads();
  f.rotate(token, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), table);
}

template <class F>
__global__ void items_kernel(F f, std::int64_t items) {
  run_items(f, items, blockIdx.x, static_cast<int>(threadIdx.x), gridDim.x, static_cast<int>(blockDim.x));
}

namespace detail {

/// two_phase_kernel over `blocks` blocks (one per token) of `threads` threads with `shared_bytes`
/// of dynamic shared memory; `what` names it in an error.
template <class F>
void launch_two_phase(const F& f, std::int64_t blocks, int threads, std::size_t shared_bytes, cudaStream_t stream,
                      const char* what) {
  two_phase_kernel<<<static_cast<unsigned>(blocks), threads, shared_bytes, stream>>>(f);
  check_launch(what);
}

/// items_kernel over `items` items (nothing for none) on `grid`; `what` names it in an error.
template <class F>
void launch_items(const F& f, std::int64_t items, item_grid grid, cudaStream_t stream, const char* what) {
  if (items == 0) return;
  items_kernel<<<static_cast<unsigned>(grid.blocks(items)), grid.block, 0, stream>>>(f, items);
  check_launch(what);
}

}  // namespace detail
}  // namespace grape::cuda
