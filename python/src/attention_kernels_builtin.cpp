// Fused attention kernels of the built-in rotations that only grape.encoding(...) objects reach:
// xPos, GRAPE-M (learnable), M-RoPE and axial 2-D RoPE.
#include "attention_kernels.tpp"

namespace grape::python {
GRAPE_PYTHON_ATTENTION_KERNELS(, xpos::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(, grape_m::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(, mrope::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(, axial_2d::instance)
}  // namespace grape::python
