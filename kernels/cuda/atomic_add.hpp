#pragma once
// *p += v, atomic on the device (float64 atomicAdd: sm_60 and later), where blocks add into the
// same gradient; a plain add in the host emulation of a body, which runs one thread at a time.
#include "grape/config.hpp"

namespace grape::cuda {

GRAPE_HOST_DEVICE inline void add_to(double* p, double v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(p, v);
#else
  *p += v;
#endif
}

}  // namespace grape::cuda
