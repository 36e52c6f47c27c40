// The GRAPE paper's bias tiles on the device over the CPU's row bodies (cpu/paper_bias_rows.hpp):
// one thread per element (gated) or per (head, query) row (path integral), grid-stride; and
// GRAPE-AP's gradient (path_integral_grad_thread.hpp), a pass over rows then one over tokens;
// gated GRAPE-A's (cpu/gated_linear_grad_items.hpp: the CPU's bodies), tokens then heads;
// contextual GRAPE-M's phase gather and scatter for cuda::attention (phase_gather_thread.hpp).
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

template <class F>
__global__ void items_kernel(F f, std::int64_t items) {
  run_items(f, items, blockIdx.x, static_cast<int>(threadIdx.x), gridDim.x, static_cast<int>(blockDim.x));
}

template <class F>
void launch_items(const F& f, std::int64_t items, cudaStream_t stream) {
  if (items == 0) return;
  items_kernel<<<static_cast<unsigned>(bias_tile_grid(items)), bias_tile_block, 0, stream>>>(f, items);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: CUDA launch failed: ") + cudaGetErrorString(e));
}

}  // namespace

void launch_path_integral_grad(const path_integral_grad_call& call, cudaStream_t stream) {
  const std::int64_t items = call.heads * call.length;
  if (items == 0) return;
  const cudaError_t e = cudaMemsetAsync(call.d_keys, 0, static_cast<std::size_t>(items) * call.dim * sizeof(double), stream);
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: cudaMemsetAsync: ") + cudaGetErrorString(e));
  launch_items(path_integral_grad_rows{call}, items, stream);
  launch_items(path_integral_grad_tokens{call}, items, stream);  // after every row: same stream
}

void launch_gated_linear_grad(const cpu::gated_linear_grad_call& call, cudaStream_t stream) {
  launch_items(cpu::gated_linear_grad_tokens{call}, static_cast<std::int64_t>(call.heads) * call.length, stream);
  launch_items(cpu::gated_linear_grad_heads{call}, call.heads, stream);  // after every token: same stream
}

void launch_phase_gather(const phase_gather& gather, cudaStream_t stream) { launch_items(gather, gather.c.items(), stream); }

void launch_phase_origin(const phase_origin& origin, cudaStream_t stream) { launch_items(origin, origin.c.items(), stream); }

void launch_phase_scatter(const phase_scatter& scatter, cudaStream_t stream) {
  const std::size_t bytes = static_cast<std::size_t>(scatter.c.rows * scatter.c.length) * sizeof(double);
  const cudaError_t e = cudaMemsetAsync(scatter.table_grads, 0, bytes, stream);
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: cudaMemsetAsync: ") + cudaGetErrorString(e));
  launch_items(scatter, scatter.c.items(), stream);
}

void launch_bias_rows(const cpu::detail::gated_linear_rows& rows, cudaStream_t stream) { launch(rows, stream); }
void launch_bias_rows(const cpu::detail::path_integral_rows& rows, cudaStream_t stream) { launch(rows, stream); }

}  // namespace grape::cuda::detail
