// grape.load_encoding's module side: opens a library compiled for a user's own encoding type
// (user_encoding.tpp) and adopts the encodings it makes as grape.BuiltinEncoding objects, so that
// every call that takes grape.encoding(...) takes them. A library stays loaded for the process's
// life (its code backs the objects' kernels).
#include <dlfcn.h>
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "builtin_encoding.hpp"
#include "cpu/matmul_path.hpp"
#include "grape/detail/error.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

struct user_library {
  const char* (*info)() = nullptr;
  encoding_kernels* (*make)(const char*, char*, std::size_t) = nullptr;
  void (*set_matmul_path)(int) = nullptr;
};

/// Every library opened, by path: opened once, kept open.
std::map<std::string, user_library>& libraries() {
  static std::map<std::string, user_library> opened;
  return opened;
}

template <class F>
F symbol(void* handle, const char* name, const std::string& path) {
  void* s = dlsym(handle, name);
  if (!s) throw input_error(fmt::format("{}: not a grape encoding library (no {})", path, name));
  return reinterpret_cast<F>(s);
}

const user_library& open_library(const std::string& path) {
  auto& opened = libraries();
  if (auto it = opened.find(path); it != opened.end()) return it->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw input_error(fmt::format("{}: cannot be loaded ({})", path, dlerror()));
  const int abi = symbol<int (*)()>(handle, "grape_user_encoding_abi", path)();
  if (abi != encoding_kernels_abi)
    throw input_error(fmt::format("{}: built for encoding_kernels version {}, this module has {} (load it again: "
                                  "the cache key changes with the package)",
                                  path, abi, encoding_kernels_abi));
  user_library lib;
  lib.info = symbol<const char* (*)()>(handle, "grape_user_encoding_info", path);
  lib.make = symbol<encoding_kernels* (*)(const char*, char*, std::size_t)>(handle, "grape_user_encoding_make", path);
  lib.set_matmul_path = symbol<void (*)(int)>(handle, "grape_user_encoding_set_matmul_path", path);
  lib.set_matmul_path(static_cast<int>(cpu::requested_matmul_path()));
  return opened.emplace(path, lib).first->second;
}

/// The message of a library's error without its own "grape: " (input_error adds it again).
std::string without_prefix(const std::string& message) {
  return message.rfind("grape: ", 0) == 0 ? message.substr(7) : message;
}

}  // namespace

void set_loaded_matmul_paths(cpu::matmul_path path) {
  for (auto& [path_name, lib] : libraries()) lib.set_matmul_path(static_cast<int>(path));
}

void bind_user_encodings(nb::module_& m) {
  m.def("_user_encoding_info", [](const std::string& path) { return std::string(open_library(path).info()); },
        "library"_a, "What a library compiled by grape.load_encoding holds, as JSON.");
  m.def(
      "_user_encoding",
      [](const std::string& path, const std::string& name, const std::string& params_json, nb::object params) {
        const user_library& lib = open_library(path);
        char error[1024] = "";
        std::unique_ptr<encoding_kernels> made(lib.make(params_json.c_str(), error, sizeof error));
        if (!made) throw input_error(without_prefix(error));
        builtin_encoding b(std::move(*made), std::move(params));
        b.name = name;  // the name grape.load_encoding registered it under
        return b;
      },
      "library"_a, "name"_a, "params_json"_a, "params"_a,
      "The library's encoding at these parameters (JSON, and the same as Python values) as a BuiltinEncoding.");
}

}  // namespace grape::python
