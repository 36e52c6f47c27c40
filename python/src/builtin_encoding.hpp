#pragma once
// What a grape.encoding(name, **params) or grape.load_encoding(...).make(...) object is: the
// encoding's kernels (encoding_kernels.hpp) and its parameters as Python values.
#include <nanobind/nanobind.h>

#include <utility>

#include "encoding_kernels.hpp"

namespace grape::python {

struct builtin_encoding : encoding_kernels {
  builtin_encoding(encoding_kernels kernels, nanobind::object values)
      : encoding_kernels(std::move(kernels)), params(std::move(values)) {}
  nanobind::object params;  // a dict of every parameter, or a list where the type's params are not named
};

}  // namespace grape::python
