#pragma once
// What the tests of grape gen share: running the CLI and compilers, a scratch folder per process,
// 16-bit storage conversions, and the nvcc resource check.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace grape_gen_test {

namespace fs = std::filesystem;

struct run_result {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

// Runs a shell command; stdout and stderr separately.
inline run_result run_command(const std::string& cmd, const fs::path& err_file) {
  run_result r;
  FILE* p = popen((cmd + " 2>" + quote(err_file.string())).c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err_file);
  return r;
}

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

inline run_result run_grape(const std::string& args) {
  return run_command(std::string(GRAPE_BINARY_DIR) + "/bin/grape " + args, work_dir() / "grape.err");
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
  const auto r = run_command(quote(nvcc) + " -std=c++17 -O3 --threads 2 -Xptxas -v" + gencode + " -c " +
                                 quote(source.string()) + " -o " + quote(source.string() + ".o"),
                             work_dir() / "nvcc.err");
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
