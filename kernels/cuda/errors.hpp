#pragma once
// CUDA runtime errors as grape's exceptions: a std::runtime_error whose message is one line
// starting with `grape:`. Host code (the host compiler or nvcc, C++17).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace grape::cuda::detail {

/// Throws "grape: {what}: {CUDA's message}" unless e is cudaSuccess.
inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: ") + what + ": " + cudaGetErrorString(e));
}

/// Throws "grape: {call} of {what}: {CUDA's message}" unless e is cudaSuccess.
inline void check_cuda(cudaError_t e, const char* call, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("grape: ") + call + " of " + what + ": " + cudaGetErrorString(e));
}

/// After a kernel launch: throws "grape: CUDA launch of {what} failed: {CUDA's message}" when it
/// failed (cudaGetLastError, which also clears the error).
inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("grape: CUDA launch of ") + what + " failed: " + cudaGetErrorString(e));
}

}  // namespace grape::cuda::detail
