// Fused attention kernels: no encoding, the rotary tables (both layouts) and M-RoPE's sections.
#include "attention_kernels.tpp"

namespace grape::python {
GRAPE_PYTHON_ATTENTION_KERNELS(, cpu::no_encoding)
GRAPE_PYTHON_ATTENTION_KERNELS(, rotary_half)
GRAPE_PYTHON_ATTENTION_KERNELS(, rotary_interleaved)
GRAPE_PYTHON_ATTENTION_KERNELS(, mrope::instance)
}  // namespace grape::python
