#pragma once
// The rank-2 GRAPE-M rotation exp(t·L), L = a bᵀ − b aᵀ, applied in O(d) without forming a matrix
// (Rodrigues): with u = aᵀx, v = bᵀx, α = ‖a‖², β = ‖b‖², γ = aᵀb, s = sqrt(αβ − γ²),
//   exp(tL)x = x + f1·(a v − b u) + f2·(γ(a v + b u) − β a u − α b v),
//   f1 = sin(ts)/s,  f2 = (1 − cos(ts))/s².
// Using the half angle h = ts/2: sin(ts) = 2 sin h cos h and 1 − cos(ts) = 2 sin² h, so there is
// no cancellation near t = 0 and no series is needed. The half-angle phase is exact (phase.hpp).
#include "grape/config.hpp"
#include "grape/math/sincos.hpp"

namespace grape::math {

/// Invariants of a rank-2 generator, computed once on the host.
struct rank2_invariants {
  double alpha;  // ‖a‖²
  double beta;   // ‖b‖²
  double gamma;  // aᵀb
  double s;      // sqrt(αβ − γ²): the rotation speed in the plane span{a, b}
};

/// y = exp(t·L)x given sin h and cos h of the half angle h = t·s/2. T: arithmetic type.
template <class T>
GRAPE_HOST_DEVICE void rank2_apply(const T* a, const T* b, const rank2_invariants& inv, T sin_h,
                                   T cos_h, const T* x, T* y, int dim) {
  T u = 0, v = 0;
  for (int i = 0; i < dim; ++i) {
    u += a[i] * x[i];
    v += b[i] * x[i];
  }
  const T s = static_cast<T>(inv.s);
  const T f1 = s > T(0) ? T(2) * sin_h * cos_h / s : T(0);
  const T f2 = s > T(0) ? T(2) * sin_h * sin_h / (s * s) : T(0);
  const T alpha = static_cast<T>(inv.alpha), beta = static_cast<T>(inv.beta),
          gamma = static_cast<T>(inv.gamma);
  const T ca = f1 * v + f2 * (gamma * v - beta * u);   // coefficient of a
  const T cb = -f1 * u + f2 * (gamma * u - alpha * v);  // coefficient of b
  for (int i = 0; i < dim; ++i) y[i] = x[i] + ca * a[i] + cb * b[i];
}

}  // namespace grape::math
