// Bad parameters give one grape::input_error line that names the field; never a crash or a NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "grape/check/builtin_checks.hpp"
#include "grape/check/rotary.hpp"

namespace grape {
namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_names(const std::string& message, const std::string& field) {
  EXPECT_EQ(message.rfind("grape: ", 0), 0u) << message;
  EXPECT_NE(message.find(field), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
}

TEST(BadParams, OddRotaryDim) {
  expect_names(error_of([] { rope::make({64, 7, 10000.0, 1.0}); }), "rotary_dim");
}
TEST(BadParams, RotaryDimPastHeadDim) {
  expect_names(error_of([] { rope::make({64, 128, 10000.0, 1.0}); }), "rotary_dim");
}
TEST(BadParams, NonPositiveOrNonFiniteBase) {
  expect_names(error_of([] { rope::make({64, 64, 0.0, 1.0}); }), "base");
  expect_names(error_of([] { rope::make({64, 64, -1.0, 1.0}); }), "base");
  expect_names(error_of([] { rope::make({64, 64, std::numeric_limits<double>::quiet_NaN(), 1.0}); }), "base");
}
TEST(BadParams, NanSlope) {
  alibi::params p{2, 8, 8.0, {0.5, std::numeric_limits<double>::quiet_NaN()}};
  expect_names(error_of([&] { alibi::make(p); }), "slopes[1]");
}
TEST(BadParams, ZeroHeads) {
  expect_names(error_of([] { alibi::make({0, 8, 8.0, {}}); }), "heads");
  expect_names(error_of([] { grape_a::make({0, 8, 8.0}); }), "heads");
  expect_names(error_of([] { t5_buckets::make({0, 8, 32, 128, true, 1}); }), "heads");
}
TEST(BadParams, SectionsThatDoNotCoverThePlanes) {
  expect_names(error_of([] { mrope::make({128, 1e6, {16, 24, 23}}); }), "sections");
}
TEST(BadParams, RankTwoVectorsOfTheWrongLength) {
  expect_names(error_of([] { grape_m::make({4, 1.0, {1, 0, 0, 0}, {0, 1, 0}}); }), "a, b");
}
TEST(BadParams, UnknownEncodingName) {
  expect_names(error_of([] { check_builtin("ropee"); }), "ropee");
}
TEST(BadParams, FixedParametersAreValidatedBeforeAnyTrial) {
  expect_names(error_of([] { check<rope>(rope::params{64, 5, 10000.0, 1.0}); }), "rotary_dim");
}
TEST(BadParams, ModelTableWithWrongLength) {
  rotary_spec s;
  s.head_dim = 8;
  s.rotary_dim = 8;
  s.inv_freq = {1.0, 0.1};
  expect_names(error_of([&] { check_rotary(s); }), "inv_freq");
}

}  // namespace
}  // namespace grape
