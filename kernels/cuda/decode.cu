// The CUDA decode attention for every storage type and built-in bias (decode_launch.cuh), and the
// queries' positions.
#include "cuda/decode_launch.cuh"

namespace grape::cuda::detail {

void launch_decode_positions(const decode_positions& p, cudaStream_t stream) {
  launch_items(p, p.s.batch, decode_item_grid, stream, "the decode's positions");
}

GRAPE_DECODE_INSTANCE(no_scores)
GRAPE_DECODE_INSTANCE(alibi_scores)
GRAPE_DECODE_INSTANCE(t5_scores)
GRAPE_DECODE_INSTANCE(fox_scores)
GRAPE_DECODE_INSTANCE(gated_scores)
GRAPE_DECODE_INSTANCE(path_integral_scores)

}  // namespace grape::cuda::detail
