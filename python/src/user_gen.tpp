// grape gen for a user's own encoding type (`grape gen --header H --type T`, the Python package's
// command: grape/__main__.py compiles this for the type and runs it). Arguments:
//   view-type                                    prints the view's C++ type name
//   write PARAMS_JSON|- TARGET OUT NAME (PATH FILE)...  writes the source: the type made at the
//        parameters given (or its default_params()), its view baked with the headers that define it
//        (PATH as included, FILE where it is), the generated file written to OUT
// Exit 0 done, 2 bad input (one `grape:` line on stderr).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "gen/instance_gen.hpp"
#include "gen/kernel_gen.hpp"
#include "grape/detail/describe.hpp"
#include "grape/detail/error.hpp"
#include "make_encoding_kernels.hpp"

#ifndef GRAPE_USER_ENCODING
#error "grape: define GRAPE_USER_ENCODING as the encoding type before including user_gen.tpp"
#endif

namespace {

using user_encoding = GRAPE_USER_ENCODING;

/// T's name as the compiler spells it ("quaternion_view").
template <class T>
std::string type_name_of() {
  const std::string_view f = __PRETTY_FUNCTION__;
  const auto at = f.find("T = ") + 4;
  return std::string(f.substr(at, f.find_first_of(";]", at) - at));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw grape::input_error(fmt::format("{}: cannot be read", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {  // whole or not at all
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary);
    out << text;
    if (!out) throw grape::input_error(fmt::format("--out {}: cannot be written", path));
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0)
    throw grape::input_error(fmt::format("--out {}: cannot be written", path));
}

/// A template, so that the branches for what E does not have are discarded, not compiled.
template <class E>
int run(int argc, char** argv) {
  using user_instance = typename E::instance;
  if constexpr (!grape::gen::viewable_instance<user_instance>()) {
    throw grape::input_error(fmt::format("gen: {} enters attention as '{}'; grape gen bakes encodings that rotate Q "
                                         "and K through a view",
                                         E::name, E::injection::description));
  } else {
    using representation = typename grape::gen::detail::instance_parts<user_instance>::representation;
    using view_type = decltype(std::declval<const representation&>().view());
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "view-type") {
      fmt::print("{}\n", type_name_of<view_type>());
      return 0;
    }
    if (mode != "write" || argc < 6 || (argc - 6) % 2 != 0)
      throw grape::input_error("usage: view-type | write PARAMS_JSON|- TARGET OUT NAME (PATH FILE)...");
    typename E::params p{};
    if (std::string(argv[2]) != "-") {
      p = grape::python::params_from_json<E>(nlohmann::json::parse(argv[2]));
    } else if constexpr (grape::python::has_default_params<E>) {
      p = E::default_params();
    } else {
      throw grape::input_error(fmt::format("--params: {} has no default_params(): give its parameters",
                                           E::name));
    }
    grape::gen::user_view view{type_name_of<view_type>(), {}};
    for (int i = 6; i + 1 < argc; i += 2) view.headers.emplace_back(argv[i], read_text(argv[i + 1]));
    const std::vector<std::string> provenance = {
        fmt::format("Encoding: {} ({}), the user's type {}", E::name, E::summary,
                    type_name_of<E>()),
        fmt::format("Parameters: {}", grape::detail::describe_params(p)),
    };
    const auto k = grape::gen::generate_instance_source(E::make(p), grape::gen::sanitize_name(argv[5]),
                                                        provenance, grape::gen::parse_target(argv[3]), &view);
    write_text(argv[4], k.source);
    fmt::print("{}: {} written ({}, encoding {})\n", argv[4], k.entry, argv[3], E::name);
    return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run<user_encoding>(argc, argv);
  } catch (const grape::input_error& e) {
    fmt::print(stderr, "{}\n", e.what());
  } catch (const std::exception& e) {  // nlohmann's parse error
    fmt::print(stderr, "grape: {}\n", e.what());
  }
  return 2;
}
