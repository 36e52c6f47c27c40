#pragma once
// Contextual GRAPE-M's phases in cuda::attention (attention_cuda.hpp): the per-item bodies of
// the two small kernels around its rotation, host-and-device code (tests/cuda_emulation runs them
// on the host):
//   gather:  Φ_call[row, t] = Φ[row, position(t)]; a position outside [0, length) sets *error
//            (and reads nothing: 0 is written);
//   origin:  origin[row, t] = Φ_call[row, first token of t's sequence], dL/dθ's origin
//            (cpu::grape_m_param_grads), after the gather;
//   scatter: dL/dΦ[row, position(t)] += dL/dΦ_call[row, t], atomic on the device (tokens may share
//            a position, so the sum's order, and its last bits, vary there).
// Items are row·tokens + t; positions come from the call as the CPU's positions_of gives them.
#include <cstdint>

#include "cuda/atomic_add.hpp"
#include "cuda/bias_positions.hpp"
#include "grape/config.hpp"

namespace grape::cuda {

/// The phase table [rows, length] and the call's tokens.
struct phase_table_call {
  int rows = 1;
  std::int64_t length = 0;
  position_source source;
  std::int64_t tokens = 0;
  std::int64_t items() const { return rows * tokens; }
};

struct phase_gather {
  phase_table_call c;
  const double* table = nullptr;  // [rows, length] Φ
  double* call_phases = nullptr;  // [rows, tokens]
  int* error = nullptr;
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    const std::int64_t row = item / c.tokens, p = c.source.at(item % c.tokens);
    const bool inside = p >= 0 && p < c.length;
    if (!inside) *error = 1;
    call_phases[item] = inside ? table[row * c.length + p] : 0.0;
  }
};

struct phase_origin {
  phase_table_call c;
  const double* call_phases = nullptr;  // [rows, tokens], gathered
  double* origins = nullptr;            // [rows, tokens]
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    const std::int64_t row = item / c.tokens;
    origins[item] = call_phases[row * c.tokens + c.source.sequence_start(item % c.tokens)];
  }
};

struct phase_scatter {
  phase_table_call c;
  const double* call_grads = nullptr;  // [rows, tokens] dL/dΦ_call
  double* table_grads = nullptr;       // [rows, length] dL/dΦ, zeroed before
  GRAPE_HOST_DEVICE void operator()(std::int64_t item) const {
    const std::int64_t row = item / c.tokens, p = c.source.at(item % c.tokens);
    if (p >= 0 && p < c.length) add_to(table_grads + row * c.length + p, call_grads[item]);
  }
};

}  // namespace grape::cuda
