// rapidcheck: random shapes, layouts, strides, position sources and dtypes against the float64
// reference; a failure shrinks to a minimal case.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "rope_reference.hpp"

namespace grape::test {
namespace {

RC_GTEST_PROP(rotate_qk_property, random_cases_match_the_reference, ()) {
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
  c.backward = *rc::gen::arbitrary<bool>();
  c.type = *rc::gen::element(cpu::dtype::f32, cpu::dtype::f16, cpu::dtype::bf16);
  c.factor = *rc::gen::element(1.0, 0.75, 1.3);
  c.pad = *rc::gen::inRange<std::int64_t>(0, 5);
  c.threads = *rc::gen::inRange(1, 3);
  c.max_pos = *rc::gen::inRange<std::int64_t>(16, 3000);
  c.seed = *rc::gen::arbitrary<std::uint32_t>();
  c.stores = *rc::gen::element(cpu::store_policy::automatic, cpu::store_policy::streaming,
                               cpu::store_policy::cached);
  const rope_result r = run_rope_case(c);
  RC_ASSERT(r.max_error <= r.tolerance);
  RC_ASSERT(r.other_mismatches == 0);
}

}  // namespace
}  // namespace grape::test
