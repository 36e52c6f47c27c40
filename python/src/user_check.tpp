// The checker grape.load_encoding(...).check() runs for a user's own encoding type: the same laws
// and the same JSON report as `grape check NAME --json`, in a process of its own (a failing law's
// kernel cannot take the interpreter down). Arguments, from grape/_load.py only:
//   PARAMS_JSON|- TRIALS SEED MAX_POSITION   ("-": random parameters; MAX_POSITION 0: the encoding's range)
// Exit 0 when every claimed law holds, 1 when one fails, 2 on bad input (one line on stderr).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "grape/check/checker.hpp"
#include "grape/check/report_json.hpp"
#include "grape/detail/error.hpp"
#include "make_encoding_kernels.hpp"

#ifndef GRAPE_USER_ENCODING
#error "grape: define GRAPE_USER_ENCODING as the encoding type before including user_check.tpp"
#endif

int main(int argc, char** argv) {
  using user_encoding = GRAPE_USER_ENCODING;
  try {
    if (argc != 5) throw grape::input_error("usage: PARAMS_JSON|- TRIALS SEED MAX_POSITION");
    const grape::check_options options{std::stoi(argv[2]), std::stoull(argv[3]), std::stoll(argv[4])};
    std::optional<typename user_encoding::params> fixed;
    if (std::string(argv[1]) != "-") {
      nlohmann::json given;
      try {
        given = nlohmann::json::parse(argv[1]);
      } catch (const nlohmann::json::parse_error& e) {
        throw grape::input_error(fmt::format("params: not JSON ({})", e.what()));
      }
      fixed = grape::python::params_from_json<user_encoding>(given);
    }
    const grape::check_report report = grape::check<user_encoding>(fixed, options);
    fmt::print("{}\n", nlohmann::json(report).dump(2));
    return report.passed() ? 0 : 1;
  } catch (const grape::input_error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // std::stoi's on a bad argument
    fmt::print(stderr, "grape: {}\n", e.what());
    return 2;
  }
}
