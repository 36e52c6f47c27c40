#pragma once
// Device copies of host arrays, each made once and freed with their owner: a representation's view
// (device_view.hpp) and an instance's bias arrays (attention_instance.hpp). Host code; compiles with
// the host compiler or nvcc (C++17).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace grape::cuda {

class device_arrays {
 public:
  device_arrays() = default;
  device_arrays(const device_arrays&) = delete;
  device_arrays& operator=(const device_arrays&) = delete;
  ~device_arrays() { release(); }

  /// A device copy of host[0..count) (null for none); `what` names it in an error.
  template <class T>
  const T* copy(const T* host, std::int64_t count, const char* what) {
    if (host == nullptr || count <= 0) return nullptr;
    void* device = nullptr;
    const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(T);
    if (cudaError_t e = cudaMalloc(&device, bytes); e != cudaSuccess)
      throw std::runtime_error(std::string("grape: cudaMalloc of ") + what + ": " + cudaGetErrorString(e));
    arrays_.push_back(device);
    if (cudaError_t e = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
      throw std::runtime_error(std::string("grape: cudaMemcpy of ") + what + ": " + cudaGetErrorString(e));
    return static_cast<const T*>(device);
  }
  template <class T>
  const T* copy(const std::vector<T>& host, const char* what) {
    return copy(host.data(), static_cast<std::int64_t>(host.size()), what);
  }
  void release() {
    for (void* a : arrays_) cudaFree(a);
    arrays_.clear();
  }

 private:
  std::vector<void*> arrays_;
};

}  // namespace grape::cuda
