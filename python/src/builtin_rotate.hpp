#pragma once
// rotate_qk and its backward on a built-in's instance (cpu::rotate_qk(instance, args),
// kernels/cpu/encode_qk.hpp), for the built-ins whose injection rotates Q and K;
// instantiated at -O3 in builtin_rotate.cpp, apart from the bindings.
#include "cpu/encode_qk.hpp"
#include "grape/inject/instance_kind.hpp"

namespace grape::python {

/// Whether cpu::rotate_qk takes this instance (a rotation, or a composition with one).
template <class Instance>
inline constexpr bool rotates_qk = rotates_qk_part<Instance>;

template <class Instance>
void rotate_builtin_qk(const Instance& inst, const cpu::rotate_qk_args& args, bool backward);

}  // namespace grape::python
