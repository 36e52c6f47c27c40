// cuda_body_emulated runs the CUDA instance body over a view relocated as cuda::device_view
// relocates it: a view whose relocate() forgets an array (which would read host memory on a GPU
// and reads the right values on the host) fails the law with a message naming relocate(). The
// tutorial's own view, which lists both its arrays, passes (examples/tutorial_representation.cpp).
#include <gtest/gtest.h>

#include <string>

#include "grape/check/checker.hpp"
#include "quaternion_rope.hpp"

namespace grape {
namespace {

/// The tutorial's view with a relocate() that lists the turns but forgets the axes.
struct forgetful_view : quaternion_view {
  template <class Move>
  void relocate(Move&& move) {
    move(turns, blocks);
  }
};
static_assert(RepresentationView<forgetful_view>);

struct forgetful_turns : quaternion_turns {
  using quaternion_turns::quaternion_turns;
  forgetful_view view() const { return {quaternion_turns::view()}; }
};

TEST(Relocate, AViewThatForgetsAnArrayFailsTheEmulatedCudaBody) {
  const auto report = check<quaternion_rope<forgetful_turns>>(check_options{});
  const auto* cpu = report.find("cpu_kernel");
  const auto* cuda = report.find("cuda_body_emulated");
  ASSERT_TRUE(cpu && cuda) << report.table();
  EXPECT_EQ(cpu->status, law_status::holds) << "the host reads the right values\n" << report.table();
  EXPECT_EQ(cuda->status, law_status::fails) << report.table();
  ASSERT_TRUE(cuda->example.has_value()) << report.table();
  EXPECT_NE(cuda->example->what.find("relocate() does not list the array at bytes 8..16 of the view"),
            std::string::npos)
      << cuda->example->what;
  EXPECT_FALSE(report.passed());
}

}  // namespace
}  // namespace grape
