// The CUDA runtime calls of device_arrays (device_arrays.hpp).
#include "cuda/device_arrays.hpp"

#include <cuda_runtime.h>

#include "cuda/errors.hpp"

namespace grape::cuda {

void* device_arrays::copy_bytes(const void* host, std::size_t bytes, const char* what) {
  // Room first, so that keeping the allocation below cannot throw and lose it.
  if (arrays_.size() == arrays_.capacity()) arrays_.reserve(2 * arrays_.size() + 1);
  void* device = nullptr;
  detail::check_cuda(cudaMalloc(&device, bytes), "cudaMalloc", what);
  arrays_.push_back(device);
  detail::check_cuda(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy", what);
  return device;
}

device_arrays::~device_arrays() {
  for (void* a : arrays_) cudaFree(a);
}

}  // namespace grape::cuda
