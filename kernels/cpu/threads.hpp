#pragma once
// OpenMP's thread queries, or one thread when the kernels are built without OpenMP
// (GRAPE_OPENMP=OFF or no OpenMP found): the `#pragma omp` lines are then ignored and every loop
// runs on the calling thread, so the only calls to stand in for are these two.
#ifdef _OPENMP
#include <omp.h>
#endif

namespace grape::cpu::detail {

inline int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

inline int thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

}  // namespace grape::cpu::detail
