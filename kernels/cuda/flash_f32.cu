// The CUDA flash attention for float storage (one translation unit per dtype keeps nvcc time down),
// and the launches of the bias positions and their range check.
#include "cuda/bias_positions.hpp"
#include "cuda/flash_launch.cuh"
#include "cuda/launch.cuh"

GRAPE_FLASH_INSTANCES(f32)

namespace grape::cuda::detail {
namespace {
/// One thread per token.
constexpr item_grid position_grid{256, 4096};
}  // namespace

void launch_position_check(const std::int64_t* positions, std::int64_t tokens, std::int64_t limit, int* error,
                           cudaStream_t stream) {
  launch_items(position_range_check{positions, limit, error}, tokens, position_grid, stream, "the position check");
}

void launch_bias_positions(const position_source& source, std::int64_t tokens, std::int64_t max_position,
                           std::int64_t* out, int* error, cudaStream_t stream) {
  launch_items(bias_positions_of{source, max_position, out, error}, tokens, position_grid, stream,
               "the bias positions");
}

}  // namespace grape::cuda::detail
