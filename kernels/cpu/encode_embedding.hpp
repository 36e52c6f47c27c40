#pragma once
// The add_embedding part of an encoding instance through the embedding kernels
// (cpu/embedding.hpp), as rotations go through rotate_qk (encode_qk.hpp) and biases through
// bias_tile_of (encode_bias.hpp):
//   cpu::add_embedding_of(sinusoidal::make(p), rows);        // the instance's exact turn fractions
//   cpu::add_embedding_of(learned_absolute::make(p), rows);  // its table rounded once to float32
#include <string>
#include <vector>

#include "cpu/embedding.hpp"
#include "grape/detail/error.hpp"
#include "grape/encodings/learned_absolute.hpp"
#include "grape/encodings/sinusoidal.hpp"
#include "grape/inject/add_embedding.hpp"

namespace grape::cpu {
namespace detail {

template <class Table>
void require_rows_dim(const embedding_instance<Table>& inst, const embedding_rows& rows) {
  if (rows.dim != inst.content_dim())
    throw input_error("rows.dim must equal the encoding's dim (" + std::to_string(inst.content_dim()) + ")");
}

}  // namespace detail

inline void add_embedding_of(const embedding_instance<sinusoidal_table>& inst, const embedding_rows& rows) {
  detail::require_rows_dim(inst, rows);
  add_sinusoidal_turns(rows, inst.table.planes.view().turns);
}

inline void add_embedding_of(const embedding_instance<learned_table>& inst, const embedding_rows& rows) {
  detail::require_rows_dim(inst, rows);
  const std::vector<float> table(inst.table.values.begin(), inst.table.values.end());
  add_learned(rows, table.data(), inst.table.rows);
}

}  // namespace grape::cpu
