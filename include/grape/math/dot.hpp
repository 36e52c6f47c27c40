#pragma once
// A dot product in 8 interleaved partial sums, added in a fixed order at the end: the compiler
// can keep the lanes in one vector register (a plain running sum is a serial chain it may not
// reorder), and the result is the same on every target, CPU or CUDA, vectorized or not.
#include "grape/config.hpp"

namespace grape::math {

template <class T, class U>
GRAPE_HOST_DEVICE T dot_lanes(const U* a, const T* x, int n) {
  constexpr int lanes = 8;
  T part[lanes] = {};
  int i = 0;
  for (; i + lanes <= n; i += lanes) {
    GRAPE_SIMD
    for (int l = 0; l < lanes; ++l) part[l] += static_cast<T>(a[i + l]) * x[i + l];
  }
  // The tail: element i + l into lane l (= (i + l) % lanes), with constant indices so that the
  // lanes stay in registers on the GPU.
  for (int l = 0; l < lanes; ++l)
    if (i + l < n) part[l] += static_cast<T>(a[i + l]) * x[i + l];
  T sum = 0;
  for (int l = 0; l < lanes; ++l) sum += part[l];
  return sum;
}

/// Two dot products with one x in one pass: dot_lanes(a, x, n) and dot_lanes(b, x, n), each lane
/// summed in the same order, with two independent chains in flight instead of one (GRAPE-M's p and
/// q: a faster rank-2 apply; docs/performance.md, appendix "Rotary kernels").
template <class T>
struct dot_pair {
  T a, b;
};

template <class T, class U>
GRAPE_HOST_DEVICE dot_pair<T> dot2_lanes(const U* a, const U* b, const T* x, int n) {
  constexpr int lanes = 8;
  T pa[lanes] = {}, pb[lanes] = {};
  int i = 0;
  for (; i + lanes <= n; i += lanes) {
    GRAPE_SIMD
    for (int l = 0; l < lanes; ++l) {
      pa[l] += static_cast<T>(a[i + l]) * x[i + l];
      pb[l] += static_cast<T>(b[i + l]) * x[i + l];
    }
  }
  for (int l = 0; l < lanes; ++l)
    if (i + l < n) {
      pa[l] += static_cast<T>(a[i + l]) * x[i + l];
      pb[l] += static_cast<T>(b[i + l]) * x[i + l];
    }
  dot_pair<T> s{0, 0};
  for (int l = 0; l < lanes; ++l) s.a += pa[l], s.b += pb[l];
  return s;
}

}  // namespace grape::math
