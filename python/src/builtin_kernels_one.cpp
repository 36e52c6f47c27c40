// The kernels of one built-in, GRAPE_PYTHON_BUILTIN (builtin_kernels.hpp): python/CMakeLists.txt
// compiles this file once per name of GRAPE_BUILTINS at -O3. The fused attention of the module's
// own encoding kinds (attention_kernels.hpp) is instantiated in attention_kernels_*.cpp; any other
// instance type (xPos's, GRAPE-M's, LieRE's, ...) here, with its rotate_qk.
#include "attention_kernels.tpp"
#include "builtin_kernels.hpp"
#include "builtin_rotate.tpp"
#include "make_encoding_kernels.hpp"

#ifndef GRAPE_PYTHON_BUILTIN
#error "grape: compile builtin_kernels_one.cpp with -DGRAPE_PYTHON_BUILTIN=<a name of GRAPE_BUILTINS>"
#endif

namespace grape::python {

template <class E>
encoding_kernels builtin_kernels(const typename E::params& p) {
  return make_encoding_kernels<E>(p);
}

template encoding_kernels builtin_kernels<GRAPE_PYTHON_BUILTIN>(const GRAPE_PYTHON_BUILTIN::params&);

}  // namespace grape::python
