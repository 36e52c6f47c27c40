// Fused attention kernels: the score biases (ALiBi, FoX, T5 buckets).
#include "attention_kernels.tpp"

namespace grape::python {
GRAPE_PYTHON_ATTENTION_KERNELS(, alibi::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(, fox::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(, t5_buckets::instance)
}  // namespace grape::python
