#pragma once
// Device scratch of one call, stream-ordered: allocated on the call's stream (zeroed there when
// asked) and freed on it when it goes out of scope, after the launches the call enqueued. Host
// code (the host compiler or nvcc).
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/errors.hpp"

namespace grape::cuda::detail {

class stream_scratch {
 public:
  stream_scratch(std::size_t bytes, cudaStream_t stream, bool zeroed = false) : stream_(stream) {
    if (bytes == 0) return;
    check_cuda(cudaMallocAsync(&data_, bytes, stream), "cudaMallocAsync", "scratch");
    if (!zeroed) return;
    // A throwing constructor runs no destructor: the scratch is freed here before the error.
    if (const cudaError_t e = cudaMemsetAsync(data_, 0, bytes, stream); e != cudaSuccess) {
      cudaFreeAsync(data_, stream);
      check_cuda(e, "zeroing scratch");
    }
  }
  ~stream_scratch() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  stream_scratch(const stream_scratch&) = delete;
  stream_scratch& operator=(const stream_scratch&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace grape::cuda::detail
