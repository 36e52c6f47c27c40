// Contextual GRAPE-M's phase gather, origins and scatter for cuda::attention on the device
// (phase_gather_thread.hpp): one thread per (row, token) item, grid-stride, on the bias tiles' grid.
#include <cuda_runtime.h>

#include "cuda/bias_tile_thread.hpp"
#include "cuda/errors.hpp"
#include "cuda/launch.cuh"
#include "cuda/phase_gather_launch.hpp"

namespace grape::cuda::detail {
namespace {

template <class F>
void launch(const F& f, std::int64_t items, cudaStream_t stream, const char* what) {
  launch_items(f, items, bias_tile_item_grid, stream, what);
}

}  // namespace

void launch_phase_gather(const phase_gather& gather, cudaStream_t stream) {
  launch(gather, gather.c.items(), stream, "the phase gather");
}

void launch_phase_origin(const phase_origin& origin, cudaStream_t stream) {
  launch(origin, origin.c.items(), stream, "the phase origins");
}

void launch_phase_scatter(const phase_scatter& scatter, cudaStream_t stream) {
  const std::size_t bytes = static_cast<std::size_t>(scatter.c.rows * scatter.c.length) * sizeof(double);
  check_cuda(cudaMemsetAsync(scatter.table_grads, 0, bytes, stream), "cudaMemsetAsync");
  launch(scatter, scatter.c.items(), stream, "the phase scatter");
}

}  // namespace grape::cuda::detail
