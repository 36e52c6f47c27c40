// rapidcheck: random shapes, layouts, strides, position sources and dtypes against the float64
// reference; a failure shrinks to a minimal case.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "rope_case_gen.hpp"

namespace grape::test {
namespace {

RC_GTEST_PROP(rotate_qk_property, random_cases_match_the_reference, ()) {
  rope_case c = draw_rope_case();
  c.backward = *rc::gen::arbitrary<bool>();
  c.stores = *rc::gen::element(cpu::store_policy::automatic, cpu::store_policy::streaming,
                               cpu::store_policy::cached);
  const rope_result r = run_rope_case(c);
  RC_ASSERT(r.max_error <= r.tolerance);
  RC_ASSERT(r.other_mismatches == 0);
}

}  // namespace
}  // namespace grape::test
