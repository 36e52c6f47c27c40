#pragma once
// Running the built grape binary (and other commands) and writing/reading small .npy files, for the
// CLI tests and the tests of grape gen. The .npy code here is deliberately separate from src/io (an
// independent check of the file format).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace grape::cli_test {

namespace fs = std::filesystem;

struct result {
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

/// A fresh directory per test, removed at the end.
struct scratch {
  fs::path dir;
  scratch() {
    std::string t = (fs::temp_directory_path() / "grape-cli-test-XXXXXX").string();
    dir = ::mkdtemp(t.data());
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path operator/(const std::string& name) const { return dir / name; }
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& e : fs::directory_iterator(dir)) n.push_back(e.path().filename().string());
    std::sort(n.begin(), n.end());
    return n;
  }
};

/// Runs one shell command (already quoted where needed), capturing its stdout and stderr.
inline result run_shell(const std::string& command) {
  const scratch s;
  const std::string cmd = command + " >'" + (s / "out").string() + "' 2>'" + (s / "err").string() + "'";
  const int rc = std::system(cmd.c_str());
  result r;
  r.code = (rc != -1 && WIFEXITED(rc)) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(s / "out");
  r.err = slurp(s / "err");
  return r;
}

/// Runs `grape ARGS` (ARGS already shell-quoted where needed), capturing stdout and stderr.
inline result run_grape(const std::string& args) {
  return run_shell(std::string("'") + GRAPE_BINARY_DIR + "/bin/grape' " + args);
}

inline std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

inline std::string config_path(const std::string& name) {
  return std::string(GRAPE_SOURCE_DIR) + "/examples/configs/" + name + "/config.json";
}

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

/// A version 1.0 .npy file.
inline void write_npy(const fs::path& p, const std::string& descr, const std::vector<std::int64_t>& shape,
                      const void* data, std::size_t bytes) {
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  write_text(p, out);
}

/// The data bytes of a version 1.0 .npy file and its header text.
inline std::pair<std::string, std::string> read_npy(const fs::path& p) {
  const std::string b = slurp(p);
  if (b.size() < 10) return {};
  const std::size_t hl = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  return {b.substr(10, hl), b.substr(10 + hl)};
}

/// IEEE half <-> float, for the float16 test.
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const std::uint32_t mant = h & 0x3ffu;
  float f;
  if (exp == 0) f = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) f = mant ? NAN : INFINITY;
  else f = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= sign;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline std::uint16_t float_to_half(float f) {  // values in normal half range, round to nearest
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (a < 6.103515625e-05f) return sign;  // flush tiny values (the tests use none)
  int e;
  const float m = std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1)
  const auto mant = static_cast<std::uint32_t>(std::nearbyint((m * 2 - 1) * 1024));
  std::uint32_t exp = static_cast<std::uint32_t>(e - 1 + 15);
  std::uint32_t mm = mant;
  if (mm == 1024) {
    mm = 0;
    ++exp;
  }
  return static_cast<std::uint16_t>(sign | (exp << 10) | mm);
}

}  // namespace grape::cli_test
