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

struct path_integral_grad_call {
  int heads = 0;
  std::int64_t length = 0;  // T
  int dim = 0;              // P
  double norm_eps = 0;
  const double* slopes = nullptr;      // [heads]
  const double* rows = nullptr;        // [heads, T, P] p
  const double* keys = nullptr;        // [heads, T, P] p̂
  const double* offset_cos = nullptr;  // [T] cos(−d)
  const double* offset_sin = nullptr;  // [T] sin(−d)
  const double* grad_tile = nullptr;   // [heads, T, T] G
  double* grad_p = nullptr;            // [heads, T, P]: dL/dp_m after rows, dL/dp after tokens
  double* d_keys = nullptr;            // [heads, T, P]: dL/dp̂, zeroed before rows
};

struct path_integral_grad_rows {
  path_integral_grad_call c;
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    const std::int64_t T = c.length, h = item / T, m = item % T;
    const int P = c.dim, half = P / 2;
    const double* x = c.rows + item * P;
    const double* g = c.grad_tile + item * T;
    double* dx = c.grad_p + item * P;
    for (int k = 0; k < P; ++k) dx[k] = 0;
    double dt = 0;  // Σ_{n<ℓ} G[m, n]: every n whose path passes ℓ
    for (std::int64_t l = 1; l <= m; ++l) {
      dt += g[l - 1];
      if (dt == 0) continue;
      const double* y = c.keys + (h * T + l) * P;
      const double cs = c.offset_cos[m - l], sn = c.offset_sin[m - l];  // of φ = ℓ − m
      double dot = 0;
      for (int k = 0; k < half; ++k)
        dot += x[k] * (y[k] * cs + y[k + half] * sn) + x[k + half] * (-y[k] * sn + y[k + half] * cs);
      const double dz = dt * c.slopes[h] / (1.0 + exp(dot / P)) / P;  // σ(−z) = 1/(1 + e^z)
      double* dy = c.d_keys + (h * T + l) * P;
      for (int k = 0; k < half; ++k) {
        dx[k] += dz * (y[k] * cs + y[k + half] * sn);
        dx[k + half] += dz * (-y[k] * sn + y[k + half] * cs);
        add_to(dy + k, dz * (x[k] * cs - x[k + half] * sn));  // R(φ)ᵀx
        add_to(dy + k + half, dz * (x[k] * sn + x[k + half] * cs));
      }
    }
  }
};

struct path_integral_grad_tokens {
  path_integral_grad_call c;
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    const int P = c.dim;
    const double* p = c.rows + item * P;
    const double* gk = c.d_keys + item * P;
    double mean_square = 0, pg = 0;
    for (int k = 0; k < P; ++k) {
      mean_square += p[k] * p[k];
      pg += p[k] * gk[k];
    }
    const double r = 1.0 / sqrt(mean_square / P + c.norm_eps);
    double* out = c.grad_p + item * P;
    for (int k = 0; k < P; ++k) out[k] += r * gk[k] - r * r * r * pg / P * p[k];
  }
};

}  // namespace grape::cuda
