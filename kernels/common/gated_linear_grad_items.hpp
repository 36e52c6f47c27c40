#pragma once
// The bodies of gated GRAPE-A's bias gradient, dL/d(ω, gates) from dL/d(bias tile) G [heads, T, T],
// shared by the CPU call (cpu/gated_linear_grad.hpp) and the CUDA one (cuda/gated_path_bias_cuda.hpp):
//   b_h(m, n) = −(m − n)·ω_h·(g_k[h, n] + g_q[h, m])  for n <= m (g_q: 0 when key-gated),
// so with w(m, n) = −(m − n)·G[h, m, n] over the causal logits,
//   dL/dg_k[h, t] = ω_h·Σ_{m>t} w(m, t),  dL/dg_q[h, t] = ω_h·Σ_{n<t} w(t, n),
//   dL/dω_h = Σ_t g_k[h, t]·Σ_{m>t} w(m, t) + g_q[h, t]·Σ_{n<t} w(t, n).
// Two passes, no atomics (the same bits on every run, on either side): one item per (head, token)
// writes the token's two sums into its gate slots, then one per head forms dL/dω_h from them and
// scales the slots by ω_h. Entries of G above the diagonal are not read. Float64 throughout;
// device-safe (C++17, no host library).
#include <cstdint>

#include "grape/config.hpp"

namespace grape::kernel {

/// Gated GRAPE-A's bias arrays (host or device memory, as the backend's).
struct gated_linear_arrays {
  int heads = 0;
  std::int64_t length = 0;              // T
  const double* omega = nullptr;        // [heads]
  const double* key_gate = nullptr;     // [heads, T]
  const double* query_gate = nullptr;   // [heads, T], or null (key-gated)
};

struct gated_linear_grad_call : gated_linear_arrays {
  const double* grad_tile = nullptr;    // [heads, T, T]: G
  double* grad = nullptr;  // dL/dω [heads], dL/dg_k [heads, T], then (query-gated) dL/dg_q [heads, T]

  GRAPE_HOST_DEVICE double* key_slots() const { return grad + heads; }
  GRAPE_HOST_DEVICE double* query_slots() const { return grad + heads + heads * length; }
};

/// Item (head, token t): the token's sums as a key and as a query, unscaled.
struct gated_linear_grad_tokens {
  gated_linear_grad_call c;
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    const std::int64_t T = c.length, h = item / T, t = item % T;
    const double* g = c.grad_tile + h * T * T;
    double as_key = 0;
    for (std::int64_t m = t + 1; m < T; ++m) as_key -= static_cast<double>(m - t) * g[m * T + t];
    c.key_slots()[item] = as_key;
    if (c.query_gate) {
      double as_query = 0;
      for (std::int64_t n = 0; n < t; ++n) as_query -= static_cast<double>(t - n) * g[t * T + n];
      c.query_slots()[item] = as_query;
    }
  }
};

/// Item h, after every token of its head: dL/dω_h, then the gate slots scaled by ω_h.
struct gated_linear_grad_heads {
  gated_linear_grad_call c;
  GRAPE_HOST_DEVICE void operator()(std::int64_t h) const {
    const std::int64_t T = c.length;
    double* key = c.key_slots() + h * T;
    double* query = c.query_gate ? c.query_slots() + h * T : nullptr;
    double d_omega = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      d_omega += c.key_gate[h * T + t] * key[t];
      if (query) d_omega += c.query_gate[h * T + t] * query[t];
      key[t] *= c.omega[h];
      if (query) query[t] *= c.omega[h];
    }
    c.grad[h] = d_omega;
  }
};

}  // namespace grape::kernel
