#pragma once
// Shared by the GPU check's parts (gpu_check.cu: rotate_qk; content_encodings_check.cpp, compiled
// by g++: contextual GRAPE-M and the gated and path-integral bias tiles; attention_check.cpp: the
// flash attention): the error check, a result row, device copies and the timing helper.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                               \
  do {                                                                         \
    const cudaError_t e = (x);                                                 \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "gpu_check: %s: %s\n", #x, cudaGetErrorString(e)); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace grape_gpu {

/// One line of the table: the largest error against the CPU, its tolerance, and the kernel's
/// bandwidth with that of its same-traffic pass.
struct row {
  char name[64];
  double max_error, tolerance, rope_gbs, copy_gbs;
};

/// Milliseconds per call of `body` on `stream`, after one warm-up call.
template <class Body>
float time_ms(cudaStream_t stream, int iterations, Body&& body) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  body();
  CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iterations; ++i) body();
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iterations;
}

/// The largest difference over the largest entry of the CPU's.
template <class T>
double relative_error(const std::vector<T>& got, const std::vector<T>& want) {
  double worst = 0, scale = 1e-30;
  for (std::size_t e = 0; e < got.size(); ++e) {
    worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(got[e])) - static_cast<float>(want[e])));
    scale = std::max(scale, std::abs(static_cast<double>(static_cast<float>(want[e]))));
  }
  return worst / scale;
}

/// A device copy of `host` (one element at least, so that an empty array still has an address).
template <class T>
T* upload(const std::vector<T>& host) {
  T* device = nullptr;
  CHECK(cudaMalloc(&device, std::max<std::size_t>(1, host.size()) * sizeof(T)));
  CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

template <class T>
std::vector<T> download(const T* device, std::size_t count) {
  std::vector<T> host(count);
  if (count > 0) CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

/// GRAPE-M's contextual rotation and the gated and path-integral bias tiles (content_encodings_check.cpp).
std::vector<row> content_encoding_rows(std::int64_t tokens, int iterations);

/// The flash attention against cpu::attention; its two number columns are TFLOP/s and the peak
/// (attention_check.cpp).
std::vector<row> attention_rows(int iterations);

/// cuda::attention for encoding instances against cpu::attention (attention_instance_check.cpp).
std::vector<row> attention_instance_rows();

/// cuda::attention_decode against cpu::attention_decode, and its K/V bandwidth against a device copy
/// of the same bytes (decode_check.cpp).
std::vector<row> decode_rows(int iterations);

}  // namespace grape_gpu
