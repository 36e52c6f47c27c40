#include <cstdio>

#include "grape/check/builtin_checks.hpp"

int main() {
  // RoPE as a type: translation<1> x rotation_planes<1> x rotate_qk<half_split>.
  const auto report = grape::check<grape::rope>(grape::rope::default_params());
  std::printf("%s", report.table().c_str());  // every claimed law, with its tolerance
  return report.passed() ? 0 : 1;
}
