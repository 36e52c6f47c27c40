#pragma once
// rotate_qk and its backward on a built-in's instance (cpu::rotate_qk(instance, args),
// kernels/cpu/encode_qk.hpp), for the encodings whose injection rotates Q and K; defined in
// builtin_rotate.tpp, instantiated at -O3 in each built-in's unit (builtin_kernels_one.cpp) and in
// a loaded type's library.
#include "cpu/encode_qk.hpp"
#include "grape/inject/instance_kind.hpp"

namespace grape::python {

template <class Instance>
void rotate_builtin_qk(const Instance& inst, const cpu::rotate_qk_args& args, bool backward);

}  // namespace grape::python
