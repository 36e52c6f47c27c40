#pragma once
// The per-thread bodies of the CUDA gradient of GRAPE-AP's bias (the CPU call and its formulas:
// cpu/path_integral_grad.hpp), dL/dp from dL/d(tile) G [heads, T, T], float64 throughout:
//   rows:   one (head, row m) per item: the row's prefix sums of G, each term's dL/dz, the row
//           side's gradient dL/dp_m (the item's own) and the key side's dL/dp̂_ℓ (shared by every
//           row: atomic adds on the device);
//   tokens: one (head, token) per item, after the rows: dL/dp = dL/dp_m + the RMS normalisation's
//           backward of dL/dp̂.
// The cos and sin of each offset come from the bias's tables. Plain arithmetic: tests/cuda_emulation
// runs both on the host.
#include <cmath>
#include <cstdint>

#include "cuda/atomic_add.hpp"
#include "grape/config.hpp"

namespace grape::cuda {

/// GRAPE-AP's bias arrays in device memory (device_path_integral_bias holds them).
struct path_integral_arrays {
  int heads = 0;
  std::int64_t length = 0;  // T
  int dim = 0;              // P
  double norm_eps = 0;      // the RMS normalisation's, as the bias was made with
  const double* slopes = nullptr;      // [heads]
  const double* rows = nullptr;        // [heads, T, P] p
  const double* keys = nullptr;        // [heads, T, P] p̂
  const double* offset_cos = nullptr;  // [T] cos(−d)
  const double* offset_sin = nullptr;  // [T] sin(−d)
};

struct path_integral_grad_call : path_integral_arrays {
  const double* grad_tile = nullptr;   // [heads, T, T] G
  double* grad_p = nullptr;            // [heads, T, P]: dL/dp_m after rows, dL/dp after tokens
  double* d_keys = nullptr;            // [heads, T, P]: dL/dp̂, zeroed before rows
};

/// One term's gradient, dt·dt(m, ℓ)/dp_m into dx (the caller's own, or shared by other blocks:
/// atomic) and dt·dt(m, ℓ)/dp̂_ℓ into dy (shared: atomic on the device): x = p_m, y = p̂_ℓ, cs and
/// sn the cos and sin of φ = ℓ − m;
/// dt/dz = slope·σ(−z), dz/dp_m = R(φ)p̂_ℓ/P, dz/dp̂_ℓ = R(φ)ᵀp_m/P.
GRAPE_HOST_DEVICE inline void add_path_term_grad(const double* x, const double* y, int P, double cs, double sn,
                                                 double slope, double dt, double* dx, bool dx_shared,
                                                 double* dy) {
  const int half = P / 2;
  double dot = 0;
  for (int k = 0; k < half; ++k)
    dot += x[k] * (y[k] * cs + y[k + half] * sn) + x[k + half] * (-y[k] * sn + y[k + half] * cs);
  const double dz = dt * slope / (1.0 + exp(dot / P)) / P;  // σ(−z) = 1/(1 + e^z)
  for (int k = 0; k < half; ++k) {
    const double dx_lo = dz * (y[k] * cs + y[k + half] * sn), dx_hi = dz * (-y[k] * sn + y[k + half] * cs);
    if (dx_shared) {
      add_to(dx + k, dx_lo);
      add_to(dx + k + half, dx_hi);
    } else {
      dx[k] += dx_lo;
      dx[k + half] += dx_hi;
    }
    add_to(dy + k, dz * (x[k] * cs - x[k + half] * sn));  // R(φ)ᵀx
    add_to(dy + k + half, dz * (x[k] * sn + x[k + half] * cs));
  }
}

/// out += the RMS normalisation's backward of gk = dL/dp̂ for p̂ = p·r, r = (mean(p²) + eps)^(−1/2):
/// r·gk − r³·(p·gk)/P·p.
GRAPE_HOST_DEVICE inline void add_path_rms_backward(const double* p, const double* gk, int P, double norm_eps,
                                                    double* out) {
  double mean_square = 0, pg = 0;
  for (int k = 0; k < P; ++k) {
    mean_square += p[k] * p[k];
    pg += p[k] * gk[k];
  }
  const double r = 1.0 / sqrt(mean_square / P + norm_eps);
  for (int k = 0; k < P; ++k) out[k] += r * gk[k] - r * r * r * pg / P * p[k];
}

struct path_integral_grad_rows {
  path_integral_grad_call c;
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    const std::int64_t T = c.length, h = item / T, m = item % T;
    const int P = c.dim;
    const double* g = c.grad_tile + item * T;
    double* dx = c.grad_p + item * P;
    for (int k = 0; k < P; ++k) dx[k] = 0;
    double dt = 0;  // Σ_{n<ℓ} G[m, n]: every n whose path passes ℓ
    for (std::int64_t l = 1; l <= m; ++l) {
      dt += g[l - 1];
      if (dt != 0)
        add_path_term_grad(c.rows + item * P, c.keys + (h * T + l) * P, P, c.offset_cos[m - l], c.offset_sin[m - l],
                           c.slopes[h], dt, dx, false, c.d_keys + (h * T + l) * P);
    }
  }
};

struct path_integral_grad_tokens {
  path_integral_grad_call c;
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    add_path_rms_backward(c.rows + item * c.dim, c.d_keys + item * c.dim, c.dim, c.norm_eps, c.grad_p + item * c.dim);
  }
};

}  // namespace grape::cuda
