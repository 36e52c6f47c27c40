#pragma once
// dL/dp for GRAPE-AP's path-integral bias (grape_ap_relative, include/grape/encodings/grape_ap.hpp)
// from dL/d(bias tile) G [heads, T, T] over one sequence:
//   b(m, n) = Σ_{ℓ=n+1..m} t(m, ℓ),  t(m, ℓ) = s_h·log σ(z),  z = ⟨p_m, R(ℓ − m)p̂_ℓ⟩/P
//   dL/dt(m, ℓ) = Σ_{n<ℓ} G[m, n]             (the row's prefix sum: every n the path passes)
//   dt/dz = s_h·σ(−z);  dz/dp_m = R(ℓ − m)p̂_ℓ/P;  dz/dp̂_ℓ = R(ℓ − m)ᵀp_m/P
//   p̂ = p·r, r = (mean(p²) + eps)^(−1/2):  dL/dp += r·g − r³·(p·g)/P·p  for g = dL/dp̂.
// Entries of G above the diagonal (masked logits) do not enter. O(H·T²·P) work, O(T·P) memory per
// head; float64 throughout. Heads run in parallel (OpenMP).
#include <cmath>
#include <cstdint>
#include <vector>

#include "grape/encodings/grape_ap.hpp"

namespace grape::cpu {

/// grad_tile: [heads, T, T] row-major, T = bias.length; grad_p: [heads, T, P], overwritten.
/// norm_eps: the eps bias was made with.
inline void path_integral_grad(const path_integral_bias& bias, double norm_eps, const double* grad_tile,
                               double* grad_p) {
  const std::int64_t T = bias.length;
  const int P = bias.dim, half = P / 2;
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < bias.num_heads; ++h) {
    const double* rows = bias.rows.data() + h * T * P;   // p
    const double* keys = bias.keys.data() + h * T * P;   // p̂
    std::vector<double> d_rows(static_cast<std::size_t>(T * P), 0.0), d_keys(d_rows.size(), 0.0);
    std::vector<double> prefix(static_cast<std::size_t>(T + 1));
    for (std::int64_t m = 0; m < T; ++m) {
      const double* g = grad_tile + (h * T + m) * T;
      prefix[0] = 0;
      for (std::int64_t n = 0; n <= m; ++n) prefix[n + 1] = prefix[n] + g[n];
      const double* x = rows + m * P;
      for (std::int64_t l = 1; l <= m; ++l) {
        const double dt = prefix[l];  // Σ_{n<l} G[m, n]
        if (dt == 0) continue;
        const double* y = keys + l * P;
        const double c = bias.offset_cos[m - l], s = bias.offset_sin[m - l];  // of φ = l − m
        double dot = 0;  // the authors' sign, as path_integral_bias::term: R(φ)y = (y1 c + y2 s, −y1 s + y2 c)
        for (int k = 0; k < half; ++k)
          dot += x[k] * (y[k] * c + y[k + half] * s) + x[k + half] * (-y[k] * s + y[k + half] * c);
        const double z = dot / P;
        const double dz = dt * bias.slopes[h] / (1.0 + std::exp(z)) / P;  // dL/dz / P: σ(−z) = 1/(1 + e^z)
        double* dx = d_rows.data() + m * P;
        double* dy = d_keys.data() + l * P;
        for (int k = 0; k < half; ++k) {
          dx[k] += dz * (y[k] * c + y[k + half] * s);
          dx[k + half] += dz * (-y[k] * s + y[k + half] * c);
          dy[k] += dz * (x[k] * c - x[k + half] * s);  // R(φ)ᵀx
          dy[k + half] += dz * (x[k] * s + x[k + half] * c);
        }
      }
    }
    for (std::int64_t t = 0; t < T; ++t) {
      const double* p = rows + t * P;
      const double* gk = d_keys.data() + t * P;
      double mean_square = 0, pg = 0;
      for (int k = 0; k < P; ++k) mean_square += p[k] * p[k], pg += p[k] * gk[k];
      const double r = 1.0 / std::sqrt(mean_square / P + norm_eps);
      double* out = grad_p + (h * T + t) * P;
      for (int k = 0; k < P; ++k) out[k] = d_rows[t * P + k] + r * gk[k] - r * r * r * pg / P * p[k];
    }
  }
}

}  // namespace grape::cpu
