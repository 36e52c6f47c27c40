#pragma once
// The kernels of one built-in for grape.encoding(...) objects: declared here for every name of the
// one list GRAPE_BUILTINS (grape/builtins.hpp) and defined in builtin_kernels_one.cpp, which
// python/CMakeLists.txt compiles once per name at -O3 (the kernels, not the bindings, need it), so a
// new built-in needs nothing in this module.
#include "encoding_kernels.hpp"
#include "grape/builtins.hpp"

namespace grape::python {

/// E at parameters p with the kernels its injection takes (make_encoding_kernels.hpp).
template <class E>
encoding_kernels builtin_kernels(const typename E::params& p);

#define GRAPE_PYTHON_DECLARE_BUILTIN(E) extern template encoding_kernels builtin_kernels<E>(const E::params&);
GRAPE_BUILTINS(GRAPE_PYTHON_DECLARE_BUILTIN)
#undef GRAPE_PYTHON_DECLARE_BUILTIN

}  // namespace grape::python
