// The library grape.load_encoding compiles for one C++ encoding type a user wrote: the same kernels
// a built-in has (make_encoding_kernels.hpp), behind a C interface the module opens with dlopen
// (user_encoding_loader.cpp) and adopts as a grape.BuiltinEncoding. The generated source that
// includes this file first includes the user's header and defines GRAPE_USER_ENCODING as the type.
#include <cstdio>
#include <exception>
#include <string>

#define GRAPE_PYTHON_OWN_KERNELS  // every kernel its type needs is instantiated here
#include "attention_kernels.tpp"
#include "builtin_rotate.tpp"
#include "cpu/matmul_path.hpp"
#include "grape/encoding.hpp"
#include "make_encoding_kernels.hpp"

#ifndef GRAPE_USER_ENCODING
#error "grape: define GRAPE_USER_ENCODING as the encoding type before including user_encoding.tpp"
#endif

namespace {

using user_encoding = GRAPE_USER_ENCODING;
static_assert(grape::Encoding<user_encoding>,
              "grape: the type given to grape.load_encoding is not a grape::Encoding (docs/concepts.md lists what "
              "one declares: group, representation, injection, name, summary, claims, params, make, random_params)");

/// The message, named after the encoding where it does not name it already ("head_dim: must be ..."
/// from the type's make() becomes "quaternion_rope: head_dim: must be ...").
void write_error(const char* what, char* error, std::size_t error_size) {
  std::string message(what);
  if (message.rfind("grape: ", 0) == 0) message.erase(0, 7);
  if (message.rfind(user_encoding::name, 0) != 0) message = std::string(user_encoding::name) + ": " + message;
  if (error_size > 0) std::snprintf(error, error_size, "%s", message.c_str());
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int grape_user_encoding_abi() { return grape::python::encoding_kernels_abi; }

/// name, summary, injection, and whether its parameters have names and defaults, as JSON.
__attribute__((visibility("default"))) const char* grape_user_encoding_info() {
  static const std::string info = grape::python::encoding_info<user_encoding>().dump();
  return info.c_str();
}

/// The encoding at the parameters given as JSON, or null with the one-line reason in `error`.
__attribute__((visibility("default"))) grape::python::encoding_kernels* grape_user_encoding_make(
    const char* params_json, char* error, std::size_t error_size) {
  try {
    nlohmann::json given;
    try {
      given = nlohmann::json::parse(params_json);
    } catch (const nlohmann::json::parse_error& e) {
      throw grape::input_error(fmt::format("params: not JSON ({})", e.what()));
    }
    const auto p = grape::python::params_from_json<user_encoding>(given);
    return new grape::python::encoding_kernels(grape::python::make_encoding_kernels<user_encoding>(p));
  } catch (const std::exception& e) {
    write_error(e.what(), error, error_size);
    return nullptr;
  }
}

/// The module's matmul request, so that grape.set_matmul_path reaches this library's kernels too.
__attribute__((visibility("default"))) void grape_user_encoding_set_matmul_path(int path) {
  grape::cpu::set_matmul_path(static_cast<grape::cpu::matmul_path>(path));
}

}  // extern "C"
