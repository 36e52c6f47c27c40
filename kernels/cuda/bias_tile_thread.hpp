#pragma once
// The grid of the CUDA bias tiles, over a row body of kernels/common (gated_path_bias_rows.hpp), grid-
// stride: one thread per element when the body gives single elements (neighbouring threads write
// neighbouring floats: coalesced stores), else one thread per (head, query) row (GRAPE-AP's row is
// one suffix sum). Plain arithmetic: tests/cuda_emulation runs it on the host over the same grid.
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda/grid_stride.hpp"
#include "grape/config.hpp"

namespace grape::cuda {

inline constexpr int bias_tile_block = 128;
inline constexpr std::int64_t bias_tile_max_grid = 65535;
/// The grid of a tile, and of any other one-thread-per-item body of the bias kernels.
inline constexpr item_grid bias_tile_item_grid{bias_tile_block, bias_tile_max_grid};

/// Whether the body gives single elements (C++17, as the library's .cu files are compiled).
template <class Rows, class = void>
struct elementwise : std::false_type {};
template <class Rows>
struct elementwise<Rows, std::void_t<decltype(std::declval<const Rows&>().element(std::int64_t{0}, std::int64_t{0}))>>
    : std::true_type {};
template <class Rows>
inline constexpr bool elementwise_rows = elementwise<Rows>::value;

/// The tile's work items: its elements, or its rows.
template <class Rows>
GRAPE_HOST_DEVICE std::int64_t bias_tile_items(const Rows& r) {
  const std::int64_t rows = r.t.heads * r.t.q_len;
  if constexpr (elementwise_rows<Rows>) return rows * r.t.k_len;
  else return r.t.k_len > 0 ? rows : 0;
}

/// Blocks for `items` items: one per thread, at most bias_tile_max_grid blocks (then strided).
inline std::int64_t bias_tile_grid(std::int64_t items) { return bias_tile_item_grid.blocks(items); }

/// The tile's items of one thread: elements, or rows.
template <class Rows>
struct bias_tile_items_of {
  Rows r;
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    if constexpr (elementwise_rows<Rows>) r.t.out[item] = r.element(item / r.t.k_len, item % r.t.k_len);
    else r(item);
  }
};
template <class Rows>
GRAPE_HOST_DEVICE void run_bias_tile(const Rows& r, std::int64_t items, std::int64_t b, int tid, std::int64_t grid,
                                     int block) {
  run_items(bias_tile_items_of<Rows>{r}, items, b, tid, grid, block);
}

}  // namespace grape::cuda
