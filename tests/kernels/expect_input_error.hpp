#pragma once
// The shape of every bad-argument test: mutate a valid fixture, call the kernel, expect one
// grape::input_error whose message starts with "grape: " and names the argument, and expect no
// buffer of the fixture to have changed.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "grape/detail/error.hpp"

namespace grape::test {

/// Fixture: default-constructible, with `spec`, `args` and `buffers()` (the float buffers the
/// call may write).
template <class Fixture>
void expect_input_error(const std::function<void(Fixture&)>& mutate, const std::string& names) {
  Fixture f;
  mutate(f);
  const std::vector<std::vector<float>> before = f.buffers();
  try {
    cpu::rotate_qk(f.spec, f.args);
    ADD_FAILURE() << "no error; expected one naming " << names;
  } catch (const input_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("grape: ", 0), 0u) << what;
    EXPECT_NE(what.find(names), std::string::npos) << what << " (expected to name " << names << ")";
  }
  EXPECT_EQ(f.buffers(), before) << "a buffer was written";
}

}  // namespace grape::test
