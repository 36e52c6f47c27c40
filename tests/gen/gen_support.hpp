#pragma once
// What the tests of grape gen share: running the CLI and compilers (through the CLI tests'
// runner), building and loading the generated sources, a scratch folder per process, the Q/K
// strides of the tests, 16-bit storage conversions, and the nvcc resource check.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/cli_util.hpp"

namespace grape_gen_test {

namespace fs = std::filesystem;

// Commands run as the CLI tests run them: stdout and stderr captured apart.
using grape::cli_test::run_grape;
using grape::cli_test::run_shell;
using grape::cli_test::slurp;

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

// One folder per process (ctest -j runs the tests of this program side by side), removed at exit.
struct scratch_dir {
  fs::path path;
  scratch_dir() : path(fs::path(GRAPE_BINARY_DIR) / "gen_test" / std::to_string(::getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

inline fs::path work_dir() {
  static const scratch_dir dir;
  return dir.path;
}

// The generated sources of a test and the shared library g++ built from them, loaded; handle is
// null and error says why when a step failed.
struct built_library {
  std::map<std::string, std::string> sources;  // a name per source (file stem, config folder) -> text
  void* handle = nullptr;
  std::string error;
};

// g++ -shared of `files` (each quoted, after a space) into `so`, then dlopen; what failed goes
// into lib.error. `flags` are added to the usual ones (-fopenmp, say).
inline void build_and_load(built_library& lib, const std::string& files, const fs::path& so,
                           const std::string& flags = "") {
  const auto r = run_shell("g++ -std=c++17 -O2 -shared -fPIC " + (flags.empty() ? "" : flags + " ") +
                           "-Wall -Wextra -Werror -o " + quote(so.string()) + files);
  if (r.code != 0) {
    lib.error = "g++ failed:\n" + r.err;
    return;
  }
  lib.handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) lib.error = dlerror();
}

// Strides of the entry points' tests: Q as [tokens, q_heads, head_dim] with 3 padding elements
// per token, K as [k_heads, tokens, head_dim] (both orders of the strides, and untouched padding
// to check); sizes in elements.
struct qk_layout {
  std::int64_t tokens, q_heads, k_heads, q_ts, q_hs, k_ts, k_hs, q_size, k_size;
};

inline qk_layout make_qk_layout(int head_dim, std::int64_t tokens, std::int64_t q_heads, std::int64_t k_heads) {
  qk_layout l{tokens, q_heads, k_heads, q_heads * head_dim + 3, head_dim, head_dim, tokens * head_dim, 0, 0};
  l.q_size = tokens * l.q_ts;
  l.k_size = k_heads * l.k_hs;
  return l;
}

inline std::uint16_t to_bf16(float f) {  // round to nearest even
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline std::uint16_t to_f16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

inline float from_bf16(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float from_f16(std::uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

// Bits of a 16-bit sign-magnitude float as an ordered integer: adjacent values differ by 1.
inline std::int32_t ordered16(std::uint16_t b) {
  const std::int32_t mag = b & 0x7fff;
  return (b & 0x8000) ? -mag : mag;
}

inline int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

inline std::string nvcc_path() {
#if defined(GRAPE_NVCC)
  return GRAPE_NVCC;
#else
  const char* env = std::getenv("GRAPE_GEN_NVCC");
  return env ? env : "";
#endif
}

inline std::vector<std::string> cuda_archs() {
#if defined(GRAPE_CUDA_ARCHS)
  std::string s = GRAPE_CUDA_ARCHS;
#else
  std::string s = "80,90";
#endif
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string a; std::getline(ss, a, ',');)
    if (!a.empty()) v.push_back(a);
  return v;
}

// nvcc -std=c++17 -Xptxas -v for every arch; returns the compiler's report, and fails the test
// unless it compiled and every one of `expected_kernels` kernels has no spill and no stack frame.
inline void check_ptxas(const std::string& nvcc, const std::vector<std::string>& archs, const fs::path& source,
                 int expected_kernels) {
  std::string gencode;
  for (const auto& a : archs) gencode += " -gencode arch=compute_" + a + ",code=sm_" + a;
  const auto r = run_shell(quote(nvcc) + " -std=c++17 -O3 --threads 2 -Xptxas -v" + gencode + " -c " +
                           quote(source.string()) + " -o " + quote(source.string() + ".o"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::regex resource(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  int kernels = 0;
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), resource); it != std::sregex_iterator(); ++it) {
    ++kernels;
    EXPECT_EQ((*it)[0].str(), "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") << r.err;
  }
  EXPECT_EQ(kernels, expected_kernels) << r.err;
}

}  // namespace grape_gen_test
