#pragma once
// Storage types of the CUDA kernels and their float conversions. On the device: float, __half and
// __nv_bfloat16; the host-side emulation (tests) adds Eigen::half and Eigen::bfloat16, which have
// the same bits, through the same trait.
#include "grape/config.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace grape::cuda {

template <class T>
struct storage;

template <>
struct storage<float> {
  GRAPE_HOST_DEVICE static float load(float x) { return x; }
  GRAPE_HOST_DEVICE static float store(float x) { return x; }
};

#if defined(__CUDACC__)
template <>
struct storage<__half> {
  __device__ static float load(__half x) { return __half2float(x); }
  __device__ static __half store(float x) { return __float2half_rn(x); }
};
template <>
struct storage<__nv_bfloat16> {
  __device__ static float load(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
};
#endif

/// V consecutive elements moved as one aligned load or store (16 bytes when V = 16 / sizeof(T)).
template <class T, int V>
struct alignas(sizeof(T) * V) chunk {
  T v[V];
};

}  // namespace grape::cuda
