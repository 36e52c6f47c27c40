#pragma once
// The only place that knows about nvcc. Everything under math/ is marked with these macros and
// must compile as plain C++ and as CUDA device code.

#if defined(__CUDACC__)
#define GRAPE_HOST_DEVICE __host__ __device__
#define GRAPE_DEVICE __device__
#else
#define GRAPE_HOST_DEVICE
#define GRAPE_DEVICE
#endif

#define GRAPE_INLINE inline

// Vectorize the loop that follows across its iterations (independent lanes): GCC otherwise turns
// dot_lanes' eight partial sums into an outer-loop vectorization with transposes, far slower
// (docs/performance.md, appendix "Rotary kernels"). Only where OpenMP is on (it needs -fopenmp or
// -fopenmp-simd) and never in device code.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#define GRAPE_SIMD _Pragma("omp simd")
#else
#define GRAPE_SIMD
#endif
