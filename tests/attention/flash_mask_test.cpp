// The forward's mask by ranges (columns_seen per row, rows_seeing per key tile) against the mask's
// definition per logit (flash_sees), for causal and non-causal calls with and without a window.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>

#include "cpu/flash_mask.hpp"

namespace grape {
namespace {

cpu::detail::flash_sequence masked_sequence(std::int64_t len, bool causal, std::int64_t window) {
  cpu::detail::flash_sequence s;
  s.len = len;
  s.causal = causal;
  s.window = window;
  return s;
}

RC_GTEST_PROP(FlashMask, RangesAreTheLogitsTheMaskLetsThrough, ()) {
  const std::int64_t len = *rc::gen::inRange<std::int64_t>(1, 300);
  const auto s = masked_sequence(len, *rc::gen::arbitrary<bool>(),
                                 *rc::gen::oneOf(rc::gen::just<std::int64_t>(0), rc::gen::inRange<std::int64_t>(1, 80)));
  const std::int64_t i0 = *rc::gen::inRange<std::int64_t>(0, len), i1 = *rc::gen::inRange<std::int64_t>(i0 + 1, len + 1);
  const std::int64_t j0 = *rc::gen::inRange<std::int64_t>(0, len), cols = *rc::gen::inRange<std::int64_t>(1, len - j0 + 1);
  std::int64_t first_row = i1, last_row = i0;
  for (std::int64_t i = i0; i < i1; ++i) {
    const auto [first, last] = cpu::detail::columns_seen(s, i, j0, cols);
    RC_ASSERT(0 <= first);
    RC_ASSERT(first <= last);
    RC_ASSERT(last <= cols);
    for (std::int64_t c = 0; c < cols; ++c) RC_ASSERT(cpu::detail::flash_sees(s, i, j0 + c) == (first <= c && c < last));
    if (first < last) first_row = std::min(first_row, i), last_row = i + 1;
  }
  const auto rows = cpu::detail::rows_seeing(s, i0, i1, j0, j0 + cols);
  if (first_row >= last_row) {
    RC_ASSERT(rows.first == rows.last);
  } else {
    RC_ASSERT(rows.first == first_row);
    RC_ASSERT(rows.last == last_row);
  }
}

}  // namespace
}  // namespace grape
