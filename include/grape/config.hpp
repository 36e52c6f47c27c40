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
