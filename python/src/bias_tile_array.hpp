#pragma once
// New float32 NumPy tiles [heads, q_len, k_len] with the cpu::bias_tile that addresses them, and
// float32 [tokens, dim] rows for the embedding kernels: shared by the bias functions (bias.cpp) and
// the built-in encodings (builtin_encoding.cpp).
#include <nanobind/ndarray.h>

#include <cstdint>

#include "arrays.hpp"
#include "cpu/embedding.hpp"
#include "cpu/score_bias.hpp"

namespace grape::python {

using tile_array = nanobind::ndarray<nanobind::numpy, float, nanobind::ndim<3>>;

struct new_tile {
  tile_array array;
  cpu::bias_tile tile;
};

/// A zeroed tile; heads >= 1 and lengths >= 0, else an input_error.
new_tile make_tile(std::int64_t heads, std::int64_t q_start, std::int64_t q_len, std::int64_t k_start,
                   std::int64_t k_len, int threads);

/// x (float32 [tokens, dim], channels contiguous, written in place) and one int64 position per token.
cpu::embedding_rows embedding_rows_of(const array& x, const array& positions, int threads);

}  // namespace grape::python
