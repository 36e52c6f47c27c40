#pragma once
// The matrix-instruction paths this CPU can run (cpu/matmul_path.hpp), and a way to run a test
// body on each of them in turn, so that every path a machine has is tested there.
#include <vector>

#include "cpu/matmul_path.hpp"

namespace grape {

inline std::vector<cpu::matmul_path> available_matmul_paths() {
  std::vector<cpu::matmul_path> paths{cpu::matmul_path::f32};
  if (cpu::cpu_matmul_units().avx512_bf16) paths.push_back(cpu::matmul_path::avx512_bf16);
  return paths;
}

/// Sets the process-wide path for its lifetime, then restores the one requested before.
struct forced_matmul_path {
  cpu::matmul_path before;
  explicit forced_matmul_path(cpu::matmul_path p) : before(cpu::requested_matmul_path()) { cpu::set_matmul_path(p); }
  ~forced_matmul_path() { cpu::set_matmul_path(before); }
  forced_matmul_path(const forced_matmul_path&) = delete;
  forced_matmul_path& operator=(const forced_matmul_path&) = delete;
};

}  // namespace grape
