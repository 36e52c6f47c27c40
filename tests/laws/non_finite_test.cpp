// A NaN from a kernel fails the kernel laws with their own message, never passes because a
// comparison with it is false (kernel_case::worst_entry, judge). The attention laws' case, a NaN
// that used to vanish in a maximum, is in diagonal_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "grape/check/checker.hpp"
#include "quaternion_rope.hpp"

namespace grape {
namespace {

/// The tutorial's view, with NaN added to channel 0 at every position that is a multiple of 64 (a
/// defect of the kernels' path alone: the representation's own float apply uses the base view).
struct nan_view : quaternion_view {
  GRAPE_HOST_DEVICE int state_floats() const { return quaternion_view::state_floats() + 1; }
  GRAPE_HOST_DEVICE void prepare(const std::int64_t* c, bool key, float* state) const {
    quaternion_view::prepare(c, key, state);
    state[2 * blocks] = c[0] % 64 == 0 ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  }
  GRAPE_HOST_DEVICE void apply(const float* state, bool key, const float* x, float* y, float* scratch) const {
    quaternion_view::apply(state, key, x, y, scratch);
    y[0] += state[2 * blocks];
  }
};
static_assert(RepresentationView<nan_view>);

struct nan_turns : quaternion_turns {
  using quaternion_turns::quaternion_turns;
  nan_view view() const { return {quaternion_turns::view()}; }
};

TEST(NonFinite, ANaNFromTheKernelsFailsEveryKernelLawWithItsOwnMessage) {
  const auto report = check<quaternion_rope<nan_turns>>(check_options{});
  EXPECT_FALSE(report.passed());
  EXPECT_EQ(report.find(law::float32_agreement)->status, law_status::holds) << report.table();
  for (const char* name : {"cpu_kernel", "cuda_body_emulated", "attention_kernel"}) {
    const auto* r = report.find(name);
    ASSERT_NE(r, nullptr) << name << "\n" << report.table();
    EXPECT_EQ(r->status, law_status::fails) << name << "\n" << report.table();
    ASSERT_TRUE(r->example) << report.table();
    EXPECT_NE(r->example->what.find("a value is not finite"), std::string::npos) << name << ": " << r->example->what;
  }
}

}  // namespace
}  // namespace grape
