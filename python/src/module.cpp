// grape._grape: the kernels and config reading of the Python package (python/grape/ is the Python
// side; grape.check and grape.list run the grape CLI installed next to it).
#include <nanobind/nanobind.h>

#include "grape/detail/error.hpp"

namespace grape::python {
void bind_encodings(nanobind::module_& m);
void bind_rotary(nanobind::module_& m);
void bind_bias(nanobind::module_& m);
void bind_fused(nanobind::module_& m);
void bind_attention(nanobind::module_& m);
void bind_builtin_encodings(nanobind::module_& m);
void bind_grape_m(nanobind::module_& m);
void bind_param_grads(nanobind::module_& m);
void bind_matmul_rate(nanobind::module_& m);
void bind_user_encodings(nanobind::module_& m);
}  // namespace grape::python

NB_MODULE(_grape, m) {
  // Encodings held by objects that live until interpreter exit (a patched transformers model in a
  // script's globals, a tensor's attribute) are still alive when the module is torn down; that is
  // not a leak, and nanobind's exit-time warning would only be noise.
  nanobind::set_leak_warnings(false);
  // Bad input: grape::input_error's one line, as a ValueError subclass.
  static nanobind::exception<grape::input_error> error(m, "GrapeError", PyExc_ValueError);
  grape::python::bind_encodings(m);
  grape::python::bind_fused(m);
  grape::python::bind_rotary(m);
  grape::python::bind_bias(m);
  grape::python::bind_attention(m);
  grape::python::bind_builtin_encodings(m);
  grape::python::bind_grape_m(m);
  grape::python::bind_param_grads(m);
  grape::python::bind_matmul_rate(m);
  grape::python::bind_user_encodings(m);
}
