// Fused attention kernels: no encoding and the rotary tables (both layouts).
#include "attention_kernels.tpp"

namespace grape::python {
GRAPE_PYTHON_ATTENTION_KERNELS(, cpu::no_encoding)
GRAPE_PYTHON_ATTENTION_KERNELS(, rotary_half)
GRAPE_PYTHON_ATTENTION_KERNELS(, rotary_interleaved)
}  // namespace grape::python
