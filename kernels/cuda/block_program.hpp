#pragma once
// A thread block written as a sequence of phases that runs unchanged on the device and, one
// block at a time, on the host (tests/cuda_emulation): each phase is for_threads(f) (f(tid) for
// every thread of the block) or for_warps(f) (f(warp) for every warp, all its lanes together, as
// warp-wide matrix instructions need), and block_sync() separates phases. On the device a thread
// runs its own tid or warp and block_sync is __syncthreads(); on the host a phase runs every tid
// or warp to completion before the next, which is exactly the barrier's guarantee. State that
// outlives a phase lives in shared memory, never in a phase's locals.
#include <cstdint>

#include "grape/config.hpp"

// The phases are lambdas over the block's shared state: inlined, they cost nothing; a closure that
// stays a call would live in local memory, which the build refuses.
#if defined(__CUDACC__)
#define GRAPE_BLOCK_INLINE __forceinline__
#else
#define GRAPE_BLOCK_INLINE inline
#endif

namespace grape::cuda {

inline constexpr int warp_size = 32;

struct block_shape {
  int threads = 0;  // a multiple of warp_size
  GRAPE_HOST_DEVICE int warps() const { return threads / warp_size; }
};

#if !defined(__CUDA_ARCH__)
/// Host emulation only: run a phase's threads and warps last to first, so that a phase that reads
/// what another thread of the same phase writes (a missing block_sync) gives a different result.
inline bool& emulate_in_reverse() {
  static bool reverse = false;
  return reverse;
}
#endif

template <class F>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void for_threads(const block_shape& b, F&& f) {
#if defined(__CUDA_ARCH__)
  (void)b;
  f(static_cast<int>(threadIdx.x));
#else
  for (int i = 0; i < b.threads; ++i) f(emulate_in_reverse() ? b.threads - 1 - i : i);
#endif
}

template <class F>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void for_warps(const block_shape& b, F&& f) {
#if defined(__CUDA_ARCH__)
  (void)b;
  f(static_cast<int>(threadIdx.x) / warp_size);
#else
  for (int i = 0; i < b.warps(); ++i) f(emulate_in_reverse() ? b.warps() - 1 - i : i);
#endif
}

/// Inside for_warps: f(lane) for the lanes of the warp (the calling lane on the device).
template <class F>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE void for_lanes(F&& f) {
#if defined(__CUDA_ARCH__)
  f(static_cast<int>(threadIdx.x) % warp_size);
#else
  for (int i = 0; i < warp_size; ++i) f(emulate_in_reverse() ? warp_size - 1 - i : i);
#endif
}

/// Typed pointers into a block's shared memory: carve(smem, offset, pointer, offset, pointer, ...)
/// points each pointer at its byte offset.
template <class P, class... Rest>
GRAPE_HOST_DEVICE inline void carve(unsigned char* smem, std::int64_t offset, P*& pointer, Rest&&... rest) {
  pointer = reinterpret_cast<P*>(smem + offset);
  if constexpr (sizeof...(Rest) > 0) carve(smem, rest...);
}

GRAPE_HOST_DEVICE inline void block_sync() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#endif
}

}  // namespace grape::cuda
