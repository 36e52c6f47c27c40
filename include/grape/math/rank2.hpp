#pragma once
// The rank-2 GRAPE-M rotation exp(t·L), L = a bᵀ − b aᵀ, applied in O(d) without forming a matrix.
// L turns only the plane span{a, b}: with an orthonormal basis (e1, e2) of it (e1 = a/‖a‖, e2 the
// part of b orthogonal to a, normalised), L = s·(e1 e2ᵀ − e2 e1ᵀ), s = sqrt(αβ − γ²)
// (α = ‖a‖², β = ‖b‖², γ = aᵀb), and with p = e1ᵀx, q = e2ᵀx
//   exp(tL)x = x + sin(ts)·(e1 q − e2 p) − (1 − cos(ts))·(e1 p + e2 q).
// Written in a and b directly (Rodrigues), the same map subtracts terms of size ‖a‖‖b‖ to get
// results of size s: in float32 that loses (‖a‖‖b‖/s)² ulps, 7e-4 relative error for a and b
// 0.01 rad apart. The orthonormal form has no such cancellation (error a few ulps of ‖x‖).
// Using the half angle h = ts/2: sin(ts) = 2 sin h cos h and 1 − cos(ts) = 2 sin² h, so there is
// no cancellation near t = 0 either. The half-angle phase is exact (phase.hpp).
#include <math.h>

#include "grape/config.hpp"
#include "grape/math/dot.hpp"
#include "grape/math/sincos.hpp"

namespace grape::math {

/// The plane of a rank-2 generator, computed once on the host in double: s and the orthonormal
/// basis (e1, e2) written to the caller's arrays of dim values. A degenerate generator (a = 0, or
/// b parallel to a) has s = 0 and e1 = e2 = 0: the identity.
inline double rank2_plane(const double* a, const double* b, int dim, double* e1, double* e2) {
  double alpha = 0, ab = 0;
  for (int i = 0; i < dim; ++i) alpha += a[i] * a[i];
  const double norm_a = sqrt(alpha);
  for (int i = 0; i < dim; ++i) e1[i] = norm_a > 0 ? a[i] / norm_a : 0.0;
  for (int i = 0; i < dim; ++i) ab += e1[i] * b[i];
  for (int i = 0; i < dim; ++i) e2[i] = b[i] - ab * e1[i];
  double again = 0;  // Gram-Schmidt twice: e2 orthogonal to e1 to double precision
  for (int i = 0; i < dim; ++i) again += e1[i] * e2[i];
  double perp = 0, beta = 0;
  for (int i = 0; i < dim; ++i) {
    e2[i] -= again * e1[i];
    perp += e2[i] * e2[i];
    beta += b[i] * b[i];
  }
  const double norm_perp = sqrt(perp);
  if (norm_a == 0 || norm_perp <= 1e-15 * sqrt(beta)) {
    for (int i = 0; i < dim; ++i) e1[i] = e2[i] = 0.0;
    return 0.0;
  }
  for (int i = 0; i < dim; ++i) e2[i] /= norm_perp;
  return norm_a * norm_perp;
}

/// y = exp(t·L)x given the plane's orthonormal basis and sin h, cos h of the half angle h = t·s/2.
template <class T>
GRAPE_HOST_DEVICE void rank2_apply(const T* e1, const T* e2, T sin_h, T cos_h, const T* x, T* y,
                                   int dim) {
  const auto pq = dot2_lanes(e1, e2, x, dim);
  const T p = pq.a, q = pq.b;
  const T sin_ts = T(2) * sin_h * cos_h, one_minus_cos = T(2) * sin_h * sin_h;
  const T c1 = sin_ts * q - one_minus_cos * p;   // coefficient of e1
  const T c2 = -sin_ts * p - one_minus_cos * q;  // coefficient of e2
  for (int i = 0; i < dim; ++i) y[i] = x[i] + c1 * e1[i] + c2 * e2[i];
}

}  // namespace grape::math
