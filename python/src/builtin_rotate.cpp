// The instance kernels of the rotating built-ins, for grape.encoding(...) in rotate_qk. A built-in
// that rotates Q and K and is missing here fails to link (builtin_encoding.cpp calls it).
#include "builtin_rotate.tpp"
#include "grape/builtins.hpp"

namespace grape::python {

#define GRAPE_ROTATE_BUILTIN(E) \
  template void rotate_builtin_qk<E::instance>(const E::instance&, const cpu::rotate_qk_args&, bool);
GRAPE_ROTATE_BUILTIN(rope)
GRAPE_ROTATE_BUILTIN(rope_interleaved)
GRAPE_ROTATE_BUILTIN(xpos)
GRAPE_ROTATE_BUILTIN(grape_m)
GRAPE_ROTATE_BUILTIN(mrope)
GRAPE_ROTATE_BUILTIN(axial_2d)
GRAPE_ROTATE_BUILTIN(string_rope)
GRAPE_ROTATE_BUILTIN(liere_2d)
GRAPE_ROTATE_BUILTIN(rope_alibi)
#undef GRAPE_ROTATE_BUILTIN

}  // namespace grape::python
