// The GRAPE paper's bias tiles on the device over the CPU's row bodies (cpu/paper_bias_rows.hpp):
// one thread per element (gated) or per (head, query) row (path integral), grid-stride.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cpu/paper_bias_rows.hpp"
#include "cuda/bias_tile_thread.hpp"
#include "cuda/paper_bias_launch.hpp"

namespace grape::cuda::detail {
namespace {

template <class Rows>
__global__ void bias_tile_kernel(Rows rows, std::int64_t items) {
  run_bias_tile(rows, items, blockIdx.x, static_cast<int>(threadIdx.x), gridDim.x, static_cast<int>(blockDim.x));
}

template <class Rows>
void launch(const Rows& rows, cudaStream_t stream) {
  const std::int64_t items = bias_tile_items(rows);
  if (items == 0) return;
  bias_tile_kernel<<<static_cast<unsigned>(bias_tile_grid(items)), bias_tile_block, 0, stream>>>(rows, items);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: CUDA launch failed: ") + cudaGetErrorString(e));
}

}  // namespace

void launch_bias_rows(const cpu::detail::gated_linear_rows& rows, cudaStream_t stream) { launch(rows, stream); }
void launch_bias_rows(const cpu::detail::path_integral_rows& rows, cudaStream_t stream) { launch(rows, stream); }

}  // namespace grape::cuda::detail
