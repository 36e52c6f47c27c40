#pragma once
// The definition behind builtin_rotate.hpp, included by the units that instantiate it
// (builtin_kernels_one.cpp for the built-ins, user_encoding.tpp for a loaded one).
#include "builtin_rotate.hpp"

namespace grape::python {

template <class Instance>
void rotate_builtin_qk(const Instance& inst, const cpu::rotate_qk_args& args, bool backward) {
  if (backward)
    cpu::rotate_qk_backward(inst, args);
  else
    cpu::rotate_qk(inst, args);
}

}  // namespace grape::python
