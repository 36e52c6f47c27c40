#pragma once
// dL/dp for GRAPE-AP's path-integral bias (grape_ap_relative, include/grape/encodings/grape_ap.hpp)
// from dL/d(bias tile) G [heads, T, T] over one sequence:
//   b(m, n) = Σ_{ℓ=n+1..m} t(m, ℓ),  t(m, ℓ) = s_h·log σ(z),  z = ⟨p_m, R(ℓ − m)p̂_ℓ⟩/P
//   dL/dt(m, ℓ) = Σ_{n<ℓ} G[m, n]             (the row's prefix sum: every n the path passes)
// then each term's gradient and the RMS normalisation's backward as the bias computes them
// (path_integral_bias::add_term_grad, normalisation_grad; the fused backward uses the same ones).
// Entries of G above the diagonal (masked logits) do not enter. O(H·T²·P) work, O(T·P) memory per
// head; float64 throughout. Heads run in parallel (OpenMP).
#include <cstdint>
#include <vector>

#include "grape/encodings/grape_ap.hpp"

namespace grape::cpu {

/// grad_tile: [heads, T, T] row-major, T = bias.length; grad_p: [heads, T, P], overwritten.
inline void path_integral_grad(const path_integral_bias& bias, const double* grad_tile, double* grad_p) {
  const std::int64_t T = bias.length, P = bias.dim, head_size = T * P;
  // dL/dp_m and dL/dp̂_ℓ [heads, T, P]: head h's thread writes head h's rows only.
  std::vector<double> d_rows(static_cast<std::size_t>(bias.num_heads * head_size), 0.0), d_keys(d_rows.size(), 0.0);
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < bias.num_heads; ++h) {
    for (std::int64_t m = 0; m < T; ++m) {
      const double* g = grad_tile + (h * T + m) * T;
      double dt = 0;  // Σ_{n<ℓ} G[m, n]
      for (std::int64_t l = 1; l <= m; ++l) {
        dt += g[l - 1];
        bias.add_term_grad(h, m, l, dt, d_rows.data(), d_keys.data());
      }
    }
    for (std::int64_t t = h * T; t < (h + 1) * T; ++t)
      bias.normalisation_grad(t, d_rows.data() + t * P, d_keys.data() + t * P, grad_p + t * P);
  }
}

}  // namespace grape::cpu
