#pragma once
// Grid-stride work items: the shape of a launch with one thread per item (strided when the items
// outnumber the grid) and the items one thread runs. Plain arithmetic: tests/cuda_emulation runs
// run_items on the host over the same grid.
#include <cstdint>

#include "grape/config.hpp"

namespace grape::cuda {

/// `block` threads a block, one thread per item, at most `max_blocks` blocks.
struct item_grid {
  int block;
  std::int64_t max_blocks;
  GRAPE_HOST_DEVICE std::int64_t blocks(std::int64_t items) const {
    const std::int64_t needed = (items + block - 1) / block;
    return needed < max_blocks ? needed : max_blocks;
  }
};

/// f(item) for the items of thread `tid` of block `b` in a grid of `grid` blocks of `block` threads.
template <class F>
GRAPE_HOST_DEVICE void run_items(const F& f, std::int64_t items, std::int64_t b, int tid, std::int64_t grid, int block) {
  for (std::int64_t item = b * block + tid; item < items; item += grid * block) f(item);
}

}  // namespace grape::cuda
