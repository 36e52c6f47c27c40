#pragma once
// The elements of gated GRAPE-A's linear bias and GRAPE-AP's path-integral bias (log σ, a path
// term, a gated value), in float64. Device-safe: the CPU tiles, the CUDA tiles and the types' own
// bias() share these functions.
#include <cmath>
#include <cstdint>

#include "grape/config.hpp"

namespace grape::math {

/// log σ(z) = −log(1 + e^−z), without overflow for either sign of z.
GRAPE_HOST_DEVICE inline double log_sigmoid(double z) {
  return z < 0 ? z - log1p(exp(z)) : -log1p(exp(-z));
}

/// One term of the path-integral bias, slope·log σ(⟨x, R(φ)y⟩/P), and its argument ⟨x, R(φ)y⟩/P:
/// x the row token's projection,
/// y the key token's normalised one, P = dim channels in half-split planes, R(φ) the GRAPE
/// authors' rotation (R(φ)y = (y₁c + y₂s, −y₁s + y₂c) per plane) given by c = cos φ, s = sin φ
/// (callers take them from a table: no trigonometry of a large angle in a device kernel).
GRAPE_HOST_DEVICE inline double path_integral_argument(const double* x, const double* y, int dim, double c, double s) {
  const int half = dim / 2;
  double dot = 0;
  for (int k = 0; k < half; ++k) dot += x[k] * (y[k] * c + y[k + half] * s) + x[k + half] * (-y[k] * s + y[k + half] * c);
  return dot / dim;
}
GRAPE_HOST_DEVICE inline double path_integral_term(const double* x, const double* y, int dim, double c, double s,
                                                   double slope) {
  return slope * log_sigmoid(path_integral_argument(x, y, dim, c, s));
}

/// The gated linear bias of a causal pair at distance m − n >= 0: −(m − n)·ω_h·rate.
GRAPE_HOST_DEVICE inline double gated_linear_value(std::int64_t distance, double omega, double rate) {
  return -static_cast<double>(distance) * omega * rate;
}

}  // namespace grape::math
