// Fused attention kernels: a rotary table composed with ALiBi (both layouts).
#include "attention_kernels.tpp"

namespace grape::python {
GRAPE_PYTHON_ATTENTION_KERNELS(, rotary_half_alibi)
GRAPE_PYTHON_ATTENTION_KERNELS(, rotary_interleaved_alibi)
}  // namespace grape::python
