#pragma once
// dL/d(ω, gates) of gated GRAPE-A's bias (grape_a_key_gated, grape_a_qk_gated) from dL/d(bias tile)
// G [heads, T, T] over one sequence, in the layout of the bias's parameters (ω [heads], key gates
// [heads, T], query gates [heads, T]) — what the fused attention's backward gives, for a bias used
// on its own (a torch model that adds the tile to its scores). The bodies are the CUDA call's
// (gated_linear_grad_items.hpp); O(H·T²), float64, parallel over tokens (OpenMP).
#include <cstdint>

#include "common/gated_linear_grad_items.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "grape/encodings/grape_a_gated.hpp"

namespace grape::cpu {

/// grad_tile: [heads, T, T] row-major, T = bias.length; grad: bias.parameter_count() doubles, overwritten.
inline void gated_linear_grad(const gated_linear_bias& bias, const double* grad_tile, double* grad) {
  const gated_linear_grad_call c{bias.num_heads,    bias.length, bias.omega.data(), bias.key_gate.data(),
                                 bias.query_gate.empty() ? nullptr : bias.query_gate.data(), grad_tile, grad};
  const gated_linear_grad_tokens tokens{c};
  const std::int64_t items = static_cast<std::int64_t>(bias.num_heads) * bias.length;
#pragma omp parallel for schedule(static)
  for (std::int64_t item = 0; item < items; ++item) tokens(item);
  const gated_linear_grad_heads heads{c};
  for (int h = 0; h < bias.num_heads; ++h) heads(h);
}

}  // namespace grape::cpu
