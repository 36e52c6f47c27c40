// Fused attention kernels of the learned built-ins that only grape.encoding(...) objects reach:
// STRING and LieRE (learned skew generators) and GRAPE-A's lift (no decode: a lift would need
// lifted keys in the cache).
#include "attention_kernels.tpp"

namespace grape::python {
GRAPE_PYTHON_ATTENTION_KERNELS(, string_rope::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(, liere_2d::instance)
GRAPE_PYTHON_ATTENTION_KERNELS_NO_DECODE(, grape_a::instance)
}  // namespace grape::python
