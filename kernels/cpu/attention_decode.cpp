// cpu::attention_decode's argument checks (the parts that do not depend on the encoding).
#include "cpu/attention_decode.hpp"

#include <fmt/format.h>

namespace grape::cpu::detail {

std::vector<std::int64_t> check_decode(const decode_args& a, int head_dim, int v_dim) {
  check_decode_shape(a, head_dim, v_dim);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(a.batch));
  for (std::int64_t b = 0; b < a.batch; ++b) {
    const std::int64_t len = a.seq_lens[b];
    if (len < 1 || len > a.max_blocks * a.block_size)
      throw input_error(fmt::format("seq_lens[{}] = {}: must lie in [1, max_blocks * block_size = {}]", b, len,
                                    a.max_blocks * a.block_size));
    for (std::int64_t i = 0; i < (len + a.block_size - 1) / a.block_size; ++i) {
      const std::int64_t block = a.block_table[b * a.max_blocks + i];
      if (block < 0 || block >= a.blocks)
        throw input_error(fmt::format("block_table[{}][{}] = {}: must lie in [0, blocks = {})", b, i, block, a.blocks));
    }
    pos[b] = a.q_positions ? a.q_positions[b] : len - 1;
    if (pos[b] < 0 || pos[b] >= a.max_position)
      throw input_error(fmt::format("q_positions[{}] = {}: must lie in [0, max_position = {})", b, pos[b], a.max_position));
  }
  return pos;
}

}  // namespace grape::cpu::detail
