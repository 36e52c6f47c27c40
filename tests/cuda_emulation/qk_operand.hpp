#pragma once
// Q or K of an emulation test's call: a contiguous buffer, in place (`in` ignored) or not, as
// [batch, heads, seq, dim] (heads_major) or [batch, seq, heads, dim] / packed [tokens, heads, dim].
#include <cstdint>
#include <vector>

#include "cpu/rotate_qk.hpp"

namespace grape::test {

template <class T>
cpu::qk_tensor qk_operand(const std::vector<T>& in, std::vector<T>& out, std::int64_t heads, std::int64_t seq_len,
                          std::int64_t head_dim, bool in_place, bool heads_major) {
  cpu::qk_tensor t;
  t.in = in_place ? static_cast<const void*>(out.data()) : in.data();
  t.out = out.data();
  t.heads = heads;
  t.size = static_cast<std::int64_t>(in.size());
  if (heads_major) {
    t.batch_stride = heads * seq_len * head_dim;
    t.head_stride = seq_len * head_dim;
    t.token_stride = head_dim;
  } else {
    t.batch_stride = seq_len * heads * head_dim;
    t.token_stride = heads * head_dim;
    t.head_stride = head_dim;
  }
  return t;
}

}  // namespace grape::test
