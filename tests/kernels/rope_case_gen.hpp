#pragma once
// A random rope_case for rapidcheck properties (call inside a property): any tensor layout,
// rotary layout, head dim (specialised or run-time, full or partial rotary), head counts (an
// operand may be absent), batch shape, position source, axes, dtype, attention factor, padding,
// threads and position range. Forward, automatic stores: properties draw the rest themselves.
#include <rapidcheck.h>

#include "rope_reference.hpp"

namespace grape::test {

inline rope_case draw_rope_case() {
  rope_case c;
  c.tl = *rc::gen::element(tensor_layout::bshd, tensor_layout::bhsd, tensor_layout::varlen);
  c.layout = *rc::gen::element(math::layout_kind::half_split, math::layout_kind::interleaved);
  c.head_dim = 2 * *rc::gen::inRange(1, 140);
  const int fixed = *rc::gen::element(64, 128, 256);
  c.rotary_dim = *rc::gen::element(0, 1) == 0 && fixed <= c.head_dim
                     ? fixed
                     : 2 * *rc::gen::inRange(1, c.head_dim / 2 + 1);
  c.hq = *rc::gen::inRange<std::int64_t>(0, 6);
  c.hk = *rc::gen::inRange<std::int64_t>(0, 4);
  c.batch = *rc::gen::inRange<std::int64_t>(1, 4);
  c.seq_len = *rc::gen::inRange<std::int64_t>(0, 10);
  c.lens = *rc::gen::container<std::vector<std::int64_t>>(rc::gen::inRange<std::int64_t>(0, 10));
  c.pm = *rc::gen::element(pos_mode::none, pos_mode::ids32, pos_mode::ids64, pos_mode::offsets);
  c.num_axes = *rc::gen::inRange(1, 4);
  c.inplace = *rc::gen::arbitrary<bool>();
  c.cached = *rc::gen::arbitrary<bool>();
  c.type = *rc::gen::element(cpu::dtype::f32, cpu::dtype::f16, cpu::dtype::bf16);
  c.factor = *rc::gen::element(1.0, 0.75, 1.3);
  c.pad = *rc::gen::inRange<std::int64_t>(0, 5);
  c.threads = *rc::gen::inRange(1, 3);
  c.max_pos = *rc::gen::inRange<std::int64_t>(16, 3000);
  c.seed = *rc::gen::arbitrary<std::uint32_t>();
  return c;
}

}  // namespace grape::test
