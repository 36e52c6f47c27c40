// Gated GRAPE-A's and GRAPE-AP's bias tiles on the device over the shared row bodies (common/gated_path_bias_rows.hpp):
// one thread per element (gated) or per (head, query) row (path integral), grid-stride; and
// GRAPE-AP's gradient (path_integral_grad_thread.hpp), a pass over rows then one over tokens;
// gated GRAPE-A's (common/gated_linear_grad_items.hpp: the CPU's bodies too), tokens then heads.
#include <cuda_runtime.h>

#include "common/gated_path_bias_rows.hpp"
#include "cuda/bias_tile_thread.hpp"
#include "cuda/errors.hpp"
#include "cuda/gated_path_bias_launch.hpp"
#include "cuda/launch.cuh"

namespace grape::cuda::detail {
namespace {

template <class F>
void launch(const F& f, std::int64_t items, cudaStream_t stream, const char* what) {
  launch_items(f, items, bias_tile_item_grid, stream, what);
}

template <class Rows>
void launch_tile(const Rows& rows, cudaStream_t stream) {
  launch(bias_tile_items_of<Rows>{rows}, bias_tile_items(rows), stream, "the bias tile");
}

}  // namespace

void launch_path_integral_grad(const path_integral_grad_call& call, cudaStream_t stream) {
  const std::int64_t items = call.heads * call.length;
  if (items == 0) return;
  check_cuda(cudaMemsetAsync(call.d_keys, 0, static_cast<std::size_t>(items) * call.dim * sizeof(double), stream),
             "cudaMemsetAsync");
  launch(path_integral_grad_rows{call}, items, stream, "the path-integral gradient's rows");
  // After every row: the same stream.
  launch(path_integral_grad_tokens{call}, items, stream, "the path-integral gradient's tokens");
}

void launch_gated_linear_grad(const kernel::gated_linear_grad_call& call, cudaStream_t stream) {
  launch(kernel::gated_linear_grad_tokens{call}, static_cast<std::int64_t>(call.heads) * call.length, stream,
         "the gated gradient's tokens");
  // After every token: the same stream.
  launch(kernel::gated_linear_grad_heads{call}, call.heads, stream, "the gated gradient's heads");
}

void launch_bias_rows(const kernel::gated_linear_rows& rows, cudaStream_t stream) { launch_tile(rows, stream); }
void launch_bias_rows(const kernel::path_integral_rows& rows, cudaStream_t stream) { launch_tile(rows, stream); }

}  // namespace grape::cuda::detail
