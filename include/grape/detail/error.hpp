#pragma once
// Bad input is reported with one line that names the file, field or argument. Library entry points
// throw grape::input_error; the CLI prints its message and exits 2.
#include <stdexcept>
#include <string>

namespace grape {

struct input_error : std::runtime_error {
  explicit input_error(const std::string& message) : std::runtime_error("grape: " + message) {}
};

}  // namespace grape
