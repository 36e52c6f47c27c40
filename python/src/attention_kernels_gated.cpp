// Fused attention kernels: gated GRAPE-A's linear bias (grape_a_key_gated, grape_a_qk_gated).
#include "attention_kernels.tpp"

namespace grape::python {
GRAPE_PYTHON_ATTENTION_KERNELS(, gated_grape_a)
}  // namespace grape::python
