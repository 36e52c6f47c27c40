// The checks of a decode call that read no array (decode_args.hpp).
#include "common/decode_args.hpp"

#include <fmt/format.h>

#include "grape/detail/error.hpp"

namespace grape::kernel {

namespace {

/// A cache tensor: not null, strides >= 0, and every slot of every block within its size.
void check_pages(const paged_cache& c, const decode_args& a, int dim, const char* name) {
  if (c.data == nullptr) throw input_error(fmt::format("{}.data must not be null", name));
  if (c.block_stride < 0 || c.slot_stride < 0 || c.head_stride < 0)
    throw input_error(fmt::format("{}: strides must be >= 0", name));
  const std::int64_t last = (a.blocks - 1) * c.block_stride + (a.block_size - 1) * c.slot_stride +
                            (a.kv_heads - 1) * c.head_stride + dim;
  if (last > c.size)
    throw input_error(fmt::format("{}: the strides address {} elements but size is {}", name, last, c.size));
}

}  // namespace

void check_decode_shape(const decode_args& a, int head_dim, int v_dim) {
  if (head_dim < 1 || v_dim < 1) throw input_error("head_dim and v_dim must be >= 1");
  if (a.q == nullptr || a.out == nullptr) throw input_error("q and out must not be null");
  if (a.batch < 1) throw input_error(fmt::format("batch must be >= 1 (got {})", a.batch));
  if (a.q_heads < 1 || a.kv_heads < 1 || a.q_heads % a.kv_heads != 0)
    throw input_error(fmt::format("q_heads ({}) must be a positive multiple of kv_heads ({})", a.q_heads, a.kv_heads));
  if (a.blocks < 1 || a.block_size < 1)
    throw input_error(fmt::format("blocks ({}) and block_size ({}) must be >= 1", a.blocks, a.block_size));
  if (a.block_table == nullptr || a.seq_lens == nullptr) throw input_error("block_table and seq_lens must not be null");
  if (a.window < 0) throw input_error(fmt::format("window must be >= 0 (got {})", a.window));
  if (!(a.scale >= 0) || !std::isfinite(a.scale)) throw input_error("scale must be finite and >= 0");
  check_pages(a.k, a, head_dim, "k");
  check_pages(a.v, a, v_dim, "v");
}

}  // namespace grape::kernel
