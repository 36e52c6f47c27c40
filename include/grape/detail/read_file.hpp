#pragma once
// A whole file's bytes, or grape::input_error naming the file.
#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <string>

#include "grape/detail/error.hpp"

namespace grape::detail {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(fmt::format("{}: cannot open the file", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw input_error(fmt::format("{}: cannot read the file", path));
  return bytes.str();
}

}  // namespace grape::detail
