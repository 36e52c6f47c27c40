#pragma once
// The built-ins by name, without the checker's templates: what `grape list` prints and what
// `grape check NAME` and the Python module run. Compiled once, in grape_check.
#include <string>
#include <string_view>
#include <vector>

#include "grape/check/report.hpp"

namespace grape {

struct builtin_info {
  std::string name;
  std::string summary;
  std::string group;
  std::string injection;
  std::vector<std::string> claims;  // the laws it claims, its own (extra) laws included
};

/// Every built-in encoding, in the registry's order (grape/builtins.hpp).
std::vector<builtin_info> builtin_infos();

/// Checks a built-in by name with random parameters; throws input_error for an unknown name.
check_report check_builtin(std::string_view name, const check_options& options = {});

}  // namespace grape
