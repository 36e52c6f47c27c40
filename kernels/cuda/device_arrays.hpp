#pragma once
// Device memory owned by a host object: copies of host arrays, made one at a time and all freed
// with their owner, so that an owner whose constructor throws half-way frees what it had copied.
// Host code without the CUDA headers (the runtime calls: device_arrays.cpp).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace grape::cuda {

class device_arrays {
 public:
  device_arrays() = default;
  device_arrays(const device_arrays&) = delete;
  device_arrays& operator=(const device_arrays&) = delete;
  ~device_arrays();

  /// A device copy of host[0..count) (null for none); `what` names it in an error.
  template <class T>
  const T* copy(const T* host, std::int64_t count, const char* what) {
    if (host == nullptr || count <= 0) return nullptr;
    return static_cast<const T*>(copy_bytes(host, static_cast<std::size_t>(count) * sizeof(T), what));
  }
  template <class T>
  const T* copy(const std::vector<T>& host, const char* what) {
    return copy(host.data(), static_cast<std::int64_t>(host.size()), what);
  }

 private:
  void* copy_bytes(const void* host, std::size_t bytes, const char* what);
  std::vector<void*> arrays_;
};

}  // namespace grape::cuda
