// Fused attention kernels: the GRAPE paper's content-dependent encodings, GRAPE-AP's path-integral
// bias (grape_ap_relative) and contextual GRAPE-M's rotation by per-token phases.
#include "attention_kernels.tpp"

namespace grape::python {
GRAPE_PYTHON_ATTENTION_KERNELS(, path_integral)
GRAPE_PYTHON_ATTENTION_KERNELS(, phase_rotation)
}  // namespace grape::python
